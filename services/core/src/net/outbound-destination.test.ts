import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../config.ts';
import {
  addressRange, allowedDestinationsSetting, canonicalAddress, checkDestination, NO_ALLOWED_DESTINATIONS, parseAllowedDestinations,
  type DestinationRule, type HostResolver, type ResolvedAddress,
} from './outbound-destination.ts';

/**
 * The outbound destination rule (issue 29, decision 058). Nothing here connects anywhere and
 * nothing asks a real resolver: names resolve through injected resolvers only.
 */

const familyOf = (address: string): 4 | 6 => (address.includes(':') ? 6 : 4);
/** A resolver that answers `addresses` for every name. */
const answering = (...addresses: string[]): HostResolver => async () => addresses.map((address): ResolvedAddress => ({ address, family: familyOf(address) }));
/** A resolver the test must never reach. */
const noResolver: HostResolver = async (name) => { throw new Error(`resolved ${name}, which the rule must not do`); };

const PRODUCTION: DestinationRule = { production: true, allowed: NO_ALLOWED_DESTINATIONS, resolve: noResolver };
const DEVELOPMENT: DestinationRule = { production: false, allowed: NO_ALLOWED_DESTINATIONS, resolve: noResolver };

/** Every address class issue 29 names, each as [address, the class ipaddr.js (through translation forms) gives it]. */
const INTERNAL: Array<[string, string]> = [
  ['127.0.0.1', 'loopback'], ['127.255.3.4', 'loopback'], ['::1', 'loopback'],
  ['10.0.0.1', 'private'], ['172.16.5.4', 'private'], ['172.31.255.254', 'private'], ['192.168.0.1', 'private'],
  ['169.254.169.254', 'linkLocal'], ['fe80::1', 'linkLocal'],
  ['fd00::1', 'uniqueLocal'], ['fc00::1', 'uniqueLocal'],
  ['100.64.0.1', 'carrierGradeNat'], ['100.127.255.254', 'carrierGradeNat'],
  ['0.0.0.0', 'unspecified'], ['0.1.2.3', 'unspecified'], ['::', 'unspecified'],
  ['224.0.0.1', 'multicast'], ['239.255.255.250', 'multicast'], ['ff02::1', 'multicast'],
  ['255.255.255.255', 'broadcast'], ['240.0.0.1', 'reserved'], ['192.0.2.1', 'reserved'], ['2001:db8::1', 'reserved'],
  // IPv4-mapped and IPv4-translated forms of internal IPv4 addresses
  ['::ffff:127.0.0.1', 'loopback'], ['::ffff:10.0.0.1', 'private'], ['::ffff:169.254.169.254', 'linkLocal'], ['::ffff:0:100.64.0.1', 'carrierGradeNat'],
  // IPv4-compatible (deprecated), whatever they carry
  ['::127.0.0.1', 'ipv4Compatible'], ['::10.0.0.1', 'ipv4Compatible'], ['::8.8.8.8', 'ipv4Compatible'],
  // NAT64 (the well-known prefix carries an IPv4 address; the local-use one is internal itself)
  ['64:ff9b::127.0.0.1', 'loopback'], ['64:ff9b::a9fe:a9fe', 'linkLocal'], ['64:ff9b::192.168.1.1', 'private'], ['64:ff9b:1::1', 'rfc6052'],
  // 6to4 carrying internal IPv4 addresses
  ['2002:7f00:1::1', 'loopback'], ['2002:a00:1::', 'private'], ['2002:a9fe:a9fe::', 'linkLocal'],
  ['2001::1', 'teredo'],
];
const PUBLIC = ['93.184.216.34', '8.8.8.8', '2606:2800:220:1:248:1893:25c8:1946', '::ffff:93.184.216.34', '64:ff9b::93.184.216.34', '2002:5db8:d822::1'];
/** Loopback forms that reach this machine: allowed outside production. */
const THIS_MACHINE = ['127.0.0.1', '127.255.3.4', '::1', '::ffff:127.0.0.1'];

const literalUrl = (address: string) => `https://${address.includes(':') ? `[${address}]` : address}:8443/hook`;

describe('address classes', () => {
  it.each(INTERNAL)('%s is %s', (address, range) => {
    expect(addressRange(address)).toBe(range);
  });
  it.each(PUBLIC)('%s is public', (address) => {
    expect(addressRange(address)).toBe('unicast');
  });
});

describe('in production', () => {
  it.each(INTERNAL)('refuses the literal %s (%s) without resolving anything', async (address) => {
    const checked = await checkDestination(literalUrl(address), PRODUCTION);
    expect(checked).toMatchObject({ ok: false, problem: 'not_allowed', message: expect.stringMatching(/public address/) });
  });

  it.each(INTERNAL)('refuses a name resolving to %s (%s), alone or beside a public address', async (address) => {
    for (const resolve of [answering(address), answering('93.184.216.34', address), answering(address, '2606:2800:220:1:248:1893:25c8:1946')]) {
      expect(await checkDestination('https://sink.example.com/hook', { ...PRODUCTION, resolve })).toMatchObject({ ok: false, problem: 'not_allowed' });
    }
  });

  it.each(['https://2130706433/', 'https://0x7f.1/', 'https://017700000001/', 'https://127.1/', 'https://0/', 'https://[::ffff:7f00:1]/', 'https://[0:0:0:0:0:ffff:127.0.0.1]/'])(
    'refuses %s: the URL parser has already made it an address', async (url) => {
      expect(await checkDestination(url, PRODUCTION)).toMatchObject({ ok: false, problem: 'not_allowed' });
    });

  it.each(['localhost', 'LOCALHOST.', 'api.localhost', 'x.y.localhost'])('refuses https://%s/ without asking a resolver', async (host) => {
    expect(await checkDestination(`https://${host}/`, PRODUCTION)).toMatchObject({ ok: false, problem: 'not_allowed' });
  });

  it.each(PUBLIC)('takes https to %s, literal or resolved, and hands back exactly the checked addresses', async (address) => {
    const canonical = canonicalAddress(address);
    expect(await checkDestination(literalUrl(address), PRODUCTION)).toMatchObject({ ok: true, addresses: [{ address: canonical }], operatorAllowed: false });
    const resolved = await checkDestination('https://siem.example.com/hook', { ...PRODUCTION, resolve: answering(address, '8.8.4.4') });
    expect(resolved).toMatchObject({ ok: true, hostname: 'siem.example.com', addresses: [{ address: canonical }, { address: '8.8.4.4' }], operatorAllowed: false });
  });

  it('refuses plain http to a public address, and says when a name does not resolve', async () => {
    expect(await checkDestination('http://siem.example.com/', { ...PRODUCTION, resolve: answering('93.184.216.34') })).toMatchObject({ ok: false, problem: 'https_required' });
    expect(await checkDestination('http://93.184.216.34/', PRODUCTION)).toMatchObject({ ok: false, problem: 'https_required' });
    const nowhere: HostResolver = async () => { throw Object.assign(new Error('getaddrinfo ENOTFOUND'), { code: 'ENOTFOUND' }); };
    expect(await checkDestination('https://gone.example.com/', { ...PRODUCTION, resolve: nowhere })).toMatchObject({ ok: false, problem: 'unresolved' });
    expect(await checkDestination('https://empty.example.com/', { ...PRODUCTION, resolve: answering() })).toMatchObject({ ok: false, problem: 'unresolved' });
    expect(await checkDestination('http://gone.example.com/', { ...PRODUCTION, resolve: nowhere })).toMatchObject({ ok: false, problem: 'https_required' });
    expect(await checkDestination('ftp://93.184.216.34/', PRODUCTION)).toMatchObject({ ok: false, problem: 'https_required' });
  });

  it('counts a name whose resolver does not answer in time as unresolved', async () => {
    const silent: HostResolver = () => new Promise(() => undefined);
    expect(await checkDestination('https://slow.example.com/', { ...PRODUCTION, resolve: silent, resolveTimeoutMs: 50 })).toMatchObject({ ok: false, problem: 'unresolved' });
  });
});

describe('in development', () => {
  it.each(THIS_MACHINE)('takes http and https to %s, literal or resolved', async (address) => {
    for (const scheme of ['http', 'https']) {
      expect(await checkDestination(literalUrl(address).replace(/^https/, scheme), DEVELOPMENT)).toMatchObject({ ok: true });
      expect(await checkDestination(`${scheme}://sink.test:8080/`, { ...DEVELOPMENT, resolve: answering(address) })).toMatchObject({ ok: true, addresses: [{ address: canonicalAddress(address) }] });
    }
    expect(await checkDestination('http://localhost:8080/', { ...DEVELOPMENT, resolve: answering(address) })).toMatchObject({ ok: true });
  });

  it.each(INTERNAL.filter(([address]) => !THIS_MACHINE.includes(address)))('refuses %s (%s) like production, literal or resolved', async (address) => {
    expect(await checkDestination(literalUrl(address), DEVELOPMENT)).toMatchObject({ ok: false, problem: 'not_allowed' });
    expect(await checkDestination('https://sink.example.com/', { ...DEVELOPMENT, resolve: answering('127.0.0.1', address) })).toMatchObject({ ok: false, problem: 'not_allowed' });
  });

  it('refuses localhost when a resolver answers anything but loopback for it, and plain http to anything but loopback', async () => {
    expect(await checkDestination('https://localhost/', { ...DEVELOPMENT, resolve: answering('93.184.216.34') })).toMatchObject({ ok: false, problem: 'not_allowed' });
    expect(await checkDestination('http://siem.example.com/', { ...DEVELOPMENT, resolve: answering('93.184.216.34') })).toMatchObject({ ok: false, problem: 'https_required' });
    expect(await checkDestination('http://sink.test/', { ...DEVELOPMENT, resolve: answering('127.0.0.1', '93.184.216.34') })).toMatchObject({ ok: false, problem: 'https_required' });
    expect(await checkDestination('https://siem.example.com/', { ...DEVELOPMENT, resolve: answering('93.184.216.34') })).toMatchObject({ ok: true });
  });
});

describe('SINK_ALLOWED_HOSTS', () => {
  const allowed = parseAllowedDestinations('otel-collector.internal, 10.20.0.0/16, 192.168.7.7, fd00:1::/32, Collector2.Corp.');

  it('lets a listed name reach whatever it resolves to, over http too, and marks it as listed', async () => {
    const rule = { production: true, allowed, resolve: answering('10.0.0.7', '127.0.0.1') };
    expect(await checkDestination('http://otel-collector.internal:4318/', rule)).toMatchObject({ ok: true, operatorAllowed: true, addresses: [{ address: '10.0.0.7' }, { address: '127.0.0.1' }] });
    expect(await checkDestination('https://collector2.corp/', rule)).toMatchObject({ ok: true, operatorAllowed: true });
    expect(await checkDestination('https://other.internal/', rule)).toMatchObject({ ok: false, problem: 'not_allowed' });
  });

  it('lets listed ranges and addresses through, each address on its own: one unlisted internal address refuses the lot', async () => {
    const rule = (...addresses: string[]) => ({ production: true, allowed, resolve: answering(...addresses) });
    expect(await checkDestination('http://10.20.3.4/', rule())).toMatchObject({ ok: true, operatorAllowed: true });
    expect(await checkDestination('https://[::ffff:10.20.3.4]/', rule())).toMatchObject({ ok: true, operatorAllowed: true });
    expect(await checkDestination('https://[fd00:1::9]/', rule())).toMatchObject({ ok: true, operatorAllowed: true });
    expect(await checkDestination('https://192.168.7.7/', rule())).toMatchObject({ ok: true, operatorAllowed: true });
    expect(await checkDestination('https://192.168.7.8/', rule())).toMatchObject({ ok: false, problem: 'not_allowed' });
    expect(await checkDestination('https://10.21.0.1/', rule())).toMatchObject({ ok: false, problem: 'not_allowed' });
    expect(await checkDestination('https://sink.example.com/', rule('10.20.3.4', '10.0.0.1'))).toMatchObject({ ok: false, problem: 'not_allowed' });
    // A public address beside a listed one: allowed, but not "on the list" (its answers stay hidden), and http is refused.
    expect(await checkDestination('https://sink.example.com/', rule('10.20.3.4', '93.184.216.34'))).toMatchObject({ ok: true, operatorAllowed: false });
    expect(await checkDestination('http://sink.example.com/', rule('10.20.3.4', '93.184.216.34'))).toMatchObject({ ok: false, problem: 'https_required' });
    // Listing localhost by name is the operator's choice, in production too.
    expect(await checkDestination('http://localhost:4318/', { production: true, allowed: parseAllowedDestinations('localhost'), resolve: answering('127.0.0.1') })).toMatchObject({ ok: true, operatorAllowed: true });
  });

  it.each(['foo:80', 'http://collector', '10.0.0.0/33', '*.example.com', 'a b', '0x7f.1', '127.1'])('refuses %j at boot, naming the variable', (entry) => {
    expect(() => parseAllowedDestinations(entry)).toThrow(/neither a host name nor an IP address or CIDR/);
    expect(() => parseConfig({ SINK_ALLOWED_HOSTS: allowedDestinationsSetting }, { SINK_ALLOWED_HOSTS: `collector.internal,${entry}` })).toThrow(ConfigError);
    expect(() => parseConfig({ SINK_ALLOWED_HOSTS: allowedDestinationsSetting }, { SINK_ALLOWED_HOSTS: entry })).toThrow(/SINK_ALLOWED_HOSTS: ".*" is neither/);
  });

  it('is empty when unset', () => {
    expect(parseConfig({ SINK_ALLOWED_HOSTS: allowedDestinationsSetting }, {}).SINK_ALLOWED_HOSTS).toEqual({ hosts: [], ranges: [] });
  });
});
