import { lookup } from 'node:dns/promises';
import ipaddr from 'ipaddr.js';
import { z } from 'zod';

/**
 * The one rule for every outbound request a tenant can aim (decision 058): audit sinks today,
 * any owner-configured URL tomorrow. Names are resolved and every address is classified with
 * ipaddr.js; the caller then connects to exactly the addresses checked here
 * (`sendOutbound`), so nothing resolves the name a second time.
 */

/** One address a host resolved to (or the host itself, when it is an address). */
export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** Every address of a host name. The default asks the system resolver (`/etc/hosts` included), as `connect` would. */
export type HostResolver = (hostname: string) => Promise<ResolvedAddress[]>;

/** What the operator lets sinks reach although it is internal (`SINK_ALLOWED_HOSTS`). */
export interface AllowedDestinations {
  /** Host names, lower case, without a trailing dot: allowed whatever they resolve to. */
  hosts: readonly string[];
  /** Address ranges (a single address is a /32 or /128). */
  ranges: ReadonlyArray<readonly [ipaddr.IPv4 | ipaddr.IPv6, number]>;
}

export interface DestinationRule {
  /** `NODE_ENV=production`: loopback is refused like every other internal address. */
  production: boolean;
  allowed: AllowedDestinations;
  /** Name resolution; the system resolver unless a test injects its own. */
  resolve?: HostResolver;
  /** Longest a name may take to resolve (5 s by default); past it the name counts as unresolved. */
  resolveTimeoutMs?: number;
}

/** Why a destination is refused: `unresolved` means its name has no address now. */
export type DestinationProblem = 'not_allowed' | 'https_required' | 'unresolved';

export type DestinationCheck =
  | {
    ok: true;
    url: URL;
    /** The host as connect and TLS need it: no brackets, no trailing dot. */
    hostname: string;
    /** The checked addresses: the only ones a connection may go to. */
    addresses: ResolvedAddress[];
    /** On `SINK_ALLOWED_HOSTS` (by name, or every address in a listed range): its answers may be shown. */
    operatorAllowed: boolean;
  }
  | { ok: false; problem: DestinationProblem; message: string };

export const NO_ALLOWED_DESTINATIONS: AllowedDestinations = { hosts: [], ranges: [] };

const systemResolver: HostResolver = async (hostname) =>
  (await lookup(hostname, { all: true, verbatim: true })).map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));

/** A resolver that does not answer makes the name unresolved, rather than the request hang. */
const RESOLVE_TIMEOUT_MS = 5_000;

function resolveWithin(resolve: HostResolver, hostname: string, timeoutMs: number): Promise<ResolvedAddress[]> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error('resolution timed out')), timeoutMs); });
  return Promise.race([resolve(hostname), deadline]).finally(() => clearTimeout(timer));
}

/** The IPv4 address an IPv6 address carries by a translation scheme, if any. */
function embeddedIPv4(address: ipaddr.IPv6): ipaddr.IPv4 | undefined {
  const bytes = address.toByteArray();
  const tail = () => ipaddr.fromByteArray(bytes.slice(12)) as ipaddr.IPv4;
  switch (address.range()) {
    case 'ipv4Mapped': // ::ffff:a.b.c.d
    case 'rfc6145': // ::ffff:0:a.b.c.d
      return tail();
    case 'rfc6052': // NAT64 64:ff9b::a.b.c.d (the local-use 64:ff9b:1::/48 stays internal)
      return address.match(NAT64_WELL_KNOWN) ? tail() : undefined;
    case '6to4': // 2002:AABB:CCDD::
      return ipaddr.fromByteArray(bytes.slice(2, 6)) as ipaddr.IPv4;
    default:
      return undefined;
  }
}
const NAT64_WELL_KNOWN = ipaddr.parseCIDR('64:ff9b::/96') as [ipaddr.IPv6, number];
const IPV4_COMPATIBLE = ipaddr.parseCIDR('::/96') as [ipaddr.IPv6, number];

/**
 * The ipaddr.js range of an address, looking through IPv4-mapped, IPv4-translated, NAT64 and
 * 6to4 forms to the IPv4 address they carry; `unicast` is a public address. IPv4-compatible
 * addresses (`::a.b.c.d`, deprecated since 2006, which ipaddr.js calls unicast) are
 * `ipv4Compatible`: never public.
 */
export function addressRange(text: string): string {
  const address = ipaddr.parse(canonicalAddress(text));
  if (address.kind() === 'ipv4') return address.range();
  const v6 = address as ipaddr.IPv6;
  const carried = embeddedIPv4(v6);
  if (carried) return carried.range();
  const range = v6.range();
  if (range === 'unicast' && v6.match(IPV4_COMPATIBLE)) return 'ipv4Compatible';
  return range;
}

/**
 * An address as the URL parser writes it (IPv6 in hex, compressed). ipaddr.js reads
 * `::127.0.0.1` (IPv4-compatible) as `::ffff:127.0.0.1` (IPv4-mapped), and glibc prints
 * IPv4-compatible addresses that way: the canonical hex form is classified and connected to.
 */
export function canonicalAddress(text: string): string {
  return text.includes(':') ? new URL(`http://[${text}]/`).hostname.slice(1, -1) : text;
}

/** Words for the ranges an owner may meet, for messages. */
const RANGE_WORDS: Record<string, string> = {
  loopback: 'loopback', private: 'private', linkLocal: 'link-local', uniqueLocal: 'unique-local', carrierGradeNat: 'carrier-grade NAT',
  unspecified: 'unspecified', multicast: 'multicast', broadcast: 'broadcast', reserved: 'reserved',
};

function inRanges(address: string, ranges: AllowedDestinations['ranges']): boolean {
  const parsed = ipaddr.process(canonicalAddress(address)); // ::ffff:a.b.c.d as a.b.c.d
  return ranges.some(([base, bits]) => base.kind() === parsed.kind() && parsed.match(base, bits));
}

/**
 * This machine: 127.0.0.0/8, ::1 and ::ffff:127.x.y.z. Not the NAT64, 6to4 or IPv4-compatible
 * forms of 127.x: those would reach another machine's loopback, so they stay internal.
 */
const isLoopback = (address: string) => ipaddr.process(canonicalAddress(address)).range() === 'loopback';

/** `localhost` and `*.localhost` (RFC 6761) name this machine whatever a resolver says. */
const isLocalhostName = (name: string) => name === 'localhost' || name.endsWith('.localhost');

/**
 * Whether `target` may be sent to under `rule`, and the addresses a connection may use:
 *
 * - http(s) only; the name resolved (a literal address as is: the URL parser has already
 *   turned `2130706433` and `0x7f.1` into `127.0.0.1`);
 * - every address must be public (`unicast` after looking through translation forms) —
 *   loopback is also allowed outside production — unless the host name is listed in
 *   `SINK_ALLOWED_HOSTS` or the address lies in a listed range;
 * - plain http only when every address is loopback outside production, or the destination
 *   is on the operator's list (by name, or every address in a listed range).
 */
export async function checkDestination(target: string | URL, rule: DestinationRule): Promise<DestinationCheck> {
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    return { ok: false, problem: 'not_allowed', message: 'must be an absolute URL' };
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return { ok: false, problem: 'https_required', message: 'must use https' };
  const hostname = url.hostname.replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '').toLowerCase();
  const nameAllowed = rule.allowed.hosts.includes(hostname);
  const httpsRequired = {
    ok: false, problem: 'https_required',
    message: rule.production
      ? 'must use https (plain http only to hosts the operator lists in SINK_ALLOWED_HOSTS)'
      : 'must use https (plain http only to loopback outside production, or to hosts on SINK_ALLOWED_HOSTS)',
  } as const;
  const notAllowed = (what: string) => ({
    ok: false, problem: 'not_allowed',
    message: `must reach a public address: ${hostname} ${what}; an operator can allow an internal collector with SINK_ALLOWED_HOSTS`,
  } as const);

  let addresses: ResolvedAddress[];
  if (ipaddr.isValid(hostname)) {
    addresses = [{ address: hostname, family: ipaddr.parse(hostname).kind() === 'ipv6' ? 6 : 4 }];
  } else {
    if (isLocalhostName(hostname) && rule.production && !nameAllowed) return notAllowed('is this machine (loopback)');
    try {
      addresses = (await resolveWithin(rule.resolve ?? systemResolver, hostname, rule.resolveTimeoutMs ?? RESOLVE_TIMEOUT_MS)).map((a) => ({ ...a, address: ipaddr.isValid(a.address) ? canonicalAddress(a.address) : a.address }));
    } catch {
      addresses = [];
    }
    if (addresses.length === 0) {
      return url.protocol === 'http:' && !nameAllowed ? httpsRequired : { ok: false, problem: 'unresolved', message: `has a host name that does not resolve (${hostname})` };
    }
  }

  const literal = addresses.length === 1 && addresses[0]!.address === hostname;
  for (const { address } of addresses) {
    if (!ipaddr.isValid(address)) return notAllowed('resolves to something that is not an address');
    const range = addressRange(address);
    if (range === 'unicast' || nameAllowed || inRanges(address, rule.allowed.ranges)) continue;
    if (!rule.production && isLoopback(address)) continue;
    const word = RANGE_WORDS[range] ?? 'special-purpose';
    return notAllowed(literal ? `is a ${word} address` : `resolves to a ${word} address`);
  }
  const operatorAllowed = nameAllowed || addresses.every((a) => inRanges(a.address, rule.allowed.ranges));
  const allLoopback = addresses.every((a) => isLoopback(a.address));
  // A resolver that answers anything but loopback for `localhost` is not to be trusted with it.
  if (isLocalhostName(hostname) && !operatorAllowed && !allLoopback) return notAllowed('names this machine but resolves elsewhere');
  if (url.protocol === 'http:' && !operatorAllowed && !(allLoopback && !rule.production)) return httpsRequired;
  return { ok: true, url, hostname, addresses, operatorAllowed };
}

/** A DNS host name: letters, digits, `-` and `_` in dot-separated labels of at most 63 characters. */
const HOST_NAME = /^(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$/;

/** How the URL parser reads `entry` as a host: a name stays as it is; `0x7f.1` becomes `127.0.0.1`. */
function hostnameOf(entry: string): string | undefined {
  try {
    return new URL(`http://${entry}/`).hostname;
  } catch {
    return undefined;
  }
}

/**
 * Parses `SINK_ALLOWED_HOSTS`: comma-separated host names (`otel-collector.internal`),
 * addresses (`10.0.0.7`, `fd00::7`) and CIDR ranges (`10.20.0.0/16`). Throws naming the
 * first entry that is none of them.
 */
export function parseAllowedDestinations(text: string): AllowedDestinations {
  const hosts: string[] = [];
  const ranges: Array<[ipaddr.IPv4 | ipaddr.IPv6, number]> = [];
  for (const raw of text.split(',').map((s) => s.trim()).filter(Boolean)) {
    const entry = raw.toLowerCase().replace(/\.$/, '');
    if (entry.includes('/') && ipaddr.isValidCIDR(entry)) ranges.push(ipaddr.parseCIDR(entry));
    else if (ipaddr.IPv4.isValidFourPartDecimal(entry) || ipaddr.IPv6.isValid(entry)) {
      const address = ipaddr.parse(entry);
      ranges.push([address, address.kind() === 'ipv4' ? 32 : 128]);
    } else if (HOST_NAME.test(entry) && hostnameOf(entry) === entry) hosts.push(entry);
    else throw new Error(`${JSON.stringify(raw)} is neither a host name nor an IP address or CIDR range (write e.g. otel-collector.internal, 10.0.0.7 or 10.20.0.0/16, comma-separated)`);
  }
  return { hosts, ranges };
}

/** The `SINK_ALLOWED_HOSTS` setting for a service's config schema: fails the boot naming a bad entry. */
export const allowedDestinationsSetting = z.string().default('').transform((value, ctx): AllowedDestinations => {
  try {
    return parseAllowedDestinations(value);
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: (err as Error).message });
    return z.NEVER;
  }
});
