import { request as httpRequest, type IncomingMessage } from 'node:http';
import { connect as netConnect, isIP, type LookupFunction, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { checkDestination, type DestinationRule, type ResolvedAddress } from './outbound-destination.ts';

/**
 * What a failed outbound request is reported as: a class, never the error's own text (which
 * can name internal details) nor the destination's answer. Refused destinations are refused
 * before any connection, so an internal port cannot be probed at all.
 */
export type OutboundFailure = 'destination not allowed' | 'name not resolved' | 'connection refused' | 'connection failed' | 'TLS error' | 'timed out';

/** Thrown by `sendOutbound` when no answer came: `failure` is the class, `message` says why a refused destination is refused. */
export class OutboundError extends Error {
  override name = 'OutboundError';
  constructor(readonly failure: OutboundFailure, message: string = failure) {
    super(message);
  }
}

/** Where a connection goes: the checked addresses of `hostname` (SNI and the certificate check use `hostname`). */
export interface ConnectTarget {
  hostname: string;
  addresses: ResolvedAddress[];
  port: number;
  tls: boolean;
}

/** Opens the connection of one request; tests inject one that fails when it should not be reached. */
export type OutboundConnector = (target: ConnectTarget) => Socket;

export interface OutboundRule extends DestinationRule {
  /** Opens connections; `connectPinned` unless a test injects one. */
  connect?: OutboundConnector;
}

export interface OutboundAnswer {
  status: number;
  /** Up to 200 characters of a non-2xx answer, only for destinations on the operator's allow-list. */
  excerpt?: string;
}

const EXCERPT_CHARS = 200;
/** Most bytes read of an answer whose excerpt may be shown. */
const EXCERPT_READ_BYTES = 4_096;

/** A `lookup` that answers the checked addresses only, so the socket cannot go anywhere else. */
function pinnedLookup(addresses: ResolvedAddress[]): LookupFunction {
  return ((_hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    if (options.all) callback(null, addresses);
    else callback(null, addresses[0]!.address, addresses[0]!.family);
  }) as LookupFunction;
}

/**
 * Connects to the checked addresses only: the host name goes to `net`/`tls` for SNI and the
 * certificate check, but its lookup answers the addresses already checked — no second
 * resolution between the check and the connection (happy eyeballs still tries them all).
 */
export const connectPinned: OutboundConnector = (target) => {
  const options = { host: target.hostname, port: target.port, lookup: pinnedLookup(target.addresses) };
  return target.tls
    ? tlsConnect({ ...options, ...(isIP(target.hostname) ? {} : { servername: target.hostname }), ALPNProtocols: ['http/1.1'] })
    : netConnect(options);
};

/**
 * Sends one request to a tenant-chosen URL under the destination rule (decision 058): the
 * URL is checked (name resolved, every address classified) right before, the connection goes
 * to the checked addresses only, redirects are never followed (a 3xx is just a status), and
 * the whole exchange has `timeoutMs`. Answers the status (and, on the allow-list, an excerpt);
 * throws `OutboundError` otherwise.
 */
export async function sendOutbound(
  target: string,
  request: { method: 'POST'; headers: Record<string, string>; body: string | Uint8Array; timeoutMs: number },
  rule: OutboundRule,
): Promise<OutboundAnswer> {
  const checked = await checkDestination(target, rule);
  if (!checked.ok) throw new OutboundError(checked.problem === 'unresolved' ? 'name not resolved' : 'destination not allowed', checked.message);
  const { url } = checked;
  const tls = url.protocol === 'https:';
  const connect = rule.connect ?? connectPinned;
  let phase: 'connecting' | 'handshake' | 'connected' = 'connecting';

  return new Promise<OutboundAnswer>((resolve, reject) => {
    let settled = false;
    const finish = (outcome: { answer: OutboundAnswer } | { failure: OutboundFailure }) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if ('answer' in outcome) resolve(outcome.answer);
      else reject(new OutboundError(outcome.failure));
      req.destroy();
    };
    const req = httpRequest({
      method: request.method,
      path: `${url.pathname}${url.search}`,
      setHost: false,
      headers: { ...request.headers, host: url.host, 'content-length': String(Buffer.byteLength(request.body)) },
      createConnection: () => {
        const socket = connect({ hostname: checked.hostname, addresses: checked.addresses, port: Number(url.port || (tls ? 443 : 80)), tls });
        socket.once('connect', () => { phase = tls ? 'handshake' : 'connected'; });
        socket.once('secureConnect', () => { phase = 'connected'; });
        return socket;
      },
    });
    const timer = setTimeout(() => finish({ failure: 'timed out' }), request.timeoutMs);
    req.on('error', (err: NodeJS.ErrnoException) => finish({ failure: failureOf(err, phase) }));
    req.on('response', (res: IncomingMessage) => {
      const status = res.statusCode ?? 0;
      res.on('error', () => undefined); // cut short on purpose below
      if (!checked.operatorAllowed || (status >= 200 && status < 300)) {
        finish({ answer: { status } });
        return;
      }
      // Only a destination the operator listed may show what it answered.
      const chunks: Buffer[] = [];
      let size = 0;
      const done = () => {
        const excerpt = Buffer.concat(chunks).toString('utf8').replace(/\s+/g, ' ').trim().slice(0, EXCERPT_CHARS);
        finish({ answer: { status, ...(excerpt ? { excerpt } : {}) } });
      };
      res.on('data', (chunk: Buffer) => {
        chunks.push(chunk);
        size += chunk.length;
        if (size >= EXCERPT_READ_BYTES) done();
      });
      res.on('end', done);
      res.on('close', done);
    });
    req.end(request.body);
  });
}

/** The class of a network error, by how far the connection got: before the TCP connect, during the TLS handshake, after. */
function failureOf(err: NodeJS.ErrnoException, phase: 'connecting' | 'handshake' | 'connected'): OutboundFailure {
  if (phase === 'handshake') return 'TLS error';
  if (phase === 'connecting' && err.code === 'ECONNREFUSED') return 'connection refused';
  if (phase === 'connecting' && /^(ERR_TLS|ERR_SSL|CERT_|UNABLE_TO|DEPTH_ZERO|SELF_SIGNED)/.test(err.code ?? '')) return 'TLS error';
  return 'connection failed';
}
