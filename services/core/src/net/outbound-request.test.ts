import { createServer, type IncomingMessage, type Server } from 'node:http';
import { connect as netConnect, type AddressInfo, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NO_ALLOWED_DESTINATIONS, parseAllowedDestinations, type HostResolver } from './outbound-destination.ts';
import { OutboundError, sendOutbound, type ConnectTarget, type OutboundConnector, type OutboundRule } from './outbound-request.ts';

/**
 * The connect path of the outbound destination rule (issue 29, decision 058). Every connection
 * here goes to a listener on 127.0.0.1; refusals are checked with a connector that fails the
 * test when it is called, never by connecting to the refused address.
 */

const POST = { method: 'POST' as const, headers: { 'content-type': 'application/json' }, body: '{"entries":[]}', timeoutMs: 2_000 };
const answering = (...addresses: string[]): HostResolver => async () => addresses.map((address) => ({ address, family: address.includes(':') ? 6 as const : 4 as const }));
/** A connector for destinations that must be refused: reaching it fails the test. */
const mustNotConnect: OutboundConnector = (target) => { throw new Error(`connected to ${JSON.stringify(target)}`); };

let server: Server;
let port: number;
const seen: Array<{ host: string | undefined; url: string | undefined }> = [];
let connections = 0;
beforeAll(async () => {
  server = createServer((req: IncomingMessage, res) => {
    req.resume();
    req.on('end', () => {
      seen.push({ host: req.headers.host, url: req.url });
      if (req.url === '/leak') res.writeHead(500, { 'content-type': 'text/plain' }).end('internal error: db_password=hunter2-3b9d');
      else if (req.url === '/redirect') res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/' }).end();
      else if (req.url === '/slow') { /* never answers */ }
      else res.writeHead(204).end();
    });
  });
  server.on('connection', () => { connections++; });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

/** Stands in for the network: records where the request was meant to go, and connects to the local (plain HTTP) listener instead. */
function toLocalListener(targets: ConnectTarget[]): OutboundConnector {
  return (target): Socket => {
    targets.push(target);
    return netConnect({ host: '127.0.0.1', port });
  };
}

describe('a refused destination is never connected to', () => {
  const production: OutboundRule = { production: true, allowed: NO_ALLOWED_DESTINATIONS, connect: mustNotConnect, resolve: answering('10.0.0.5') };

  it.each([
    'https://127.0.0.1:8443/', 'https://2130706433/', 'https://[::ffff:127.0.0.1]/', 'https://0.0.0.0/', 'https://localhost/', 'https://169.254.169.254/',
    'https://[fd00::1]/', 'https://100.64.0.1/', 'https://[64:ff9b::a00:1]/', 'https://[2002:a00:1::]/', 'https://[::a00:1]/', 'https://siem.example.com/',
    'http://93.184.216.34/',
  ])('%s: destination not allowed, before any connection', async (url) => {
    const before = connections;
    const err = await sendOutbound(url, POST, production).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OutboundError);
    expect((err as OutboundError).failure).toBe('destination not allowed');
    expect(connections).toBe(before);
  });

  it('a name that resolves nowhere is not connected to either', async () => {
    const err = await sendOutbound('https://gone.example.com/', POST, { ...production, resolve: async () => [] }).catch((e: unknown) => e);
    expect((err as OutboundError).failure).toBe('name not resolved');
  });

  it('a name that resolved publicly and now resolves internally is refused at the next request, without connecting', async () => {
    let answer = '93.184.216.34';
    const targets: ConnectTarget[] = [];
    const rule: OutboundRule = { production: true, allowed: NO_ALLOWED_DESTINATIONS, resolve: async () => [{ address: answer, family: 4 }], connect: toLocalListener(targets) };
    expect(await sendOutbound('https://siem.example.com/hook', POST, rule)).toEqual({ status: 204 });
    // The connection went to the checked address, with the name kept for SNI and Host.
    expect(targets).toEqual([{ hostname: 'siem.example.com', addresses: [{ address: '93.184.216.34', family: 4 }], port: 443, tls: true }]);
    expect(seen.at(-1)).toEqual({ host: 'siem.example.com', url: '/hook' });

    answer = '10.0.0.5';
    const err = await sendOutbound('https://siem.example.com/hook', POST, { ...rule, connect: mustNotConnect }).catch((e: unknown) => e);
    expect((err as OutboundError).failure).toBe('destination not allowed');
    expect(targets).toHaveLength(1);
  });
});

describe('connecting to what was checked', () => {
  const development: OutboundRule = { production: false, allowed: NO_ALLOWED_DESTINATIONS };

  it('connects to the checked address without asking a resolver again (the name exists for the injected resolver only)', async () => {
    let lookups = 0;
    const resolve: HostResolver = async (name) => { lookups++; return name === 'collector.test' ? [{ address: '127.0.0.1', family: 4 }] : []; };
    expect(await sendOutbound(`http://collector.test:${port}/hook`, POST, { ...development, resolve })).toEqual({ status: 204 });
    expect(lookups).toBe(1);
    expect(seen.at(-1)).toEqual({ host: `collector.test:${port}`, url: '/hook' });
  });

  it('names the class of a failure, never its text: connection refused, TLS error, timed out', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const closedPort = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const failure = (url: string, rule: OutboundRule = development, timeoutMs = 2_000) =>
      sendOutbound(url, { ...POST, timeoutMs }, rule).then(() => 'delivered', (e: OutboundError) => e.failure);
    expect(await failure(`http://127.0.0.1:${closedPort}/`)).toBe('connection refused');
    // https to a plain HTTP port: the TLS handshake fails.
    expect(await failure(`https://127.0.0.1:${port}/`)).toBe('TLS error');
    expect(await failure(`https://collector.test:${port}/`, { ...development, resolve: answering('127.0.0.1') })).toBe('TLS error');
    expect(await failure(`http://127.0.0.1:${port}/slow`, development, 200)).toBe('timed out');
  });

  it('shows what a destination answered only when the operator listed it, and never follows a redirect', async () => {
    expect(await sendOutbound(`http://127.0.0.1:${port}/leak`, POST, development)).toEqual({ status: 500 });
    const listed = { ...development, allowed: parseAllowedDestinations('127.0.0.1') };
    expect(await sendOutbound(`http://127.0.0.1:${port}/leak`, POST, listed)).toEqual({ status: 500, excerpt: 'internal error: db_password=hunter2-3b9d' });
    const before = seen.length;
    expect(await sendOutbound(`http://127.0.0.1:${port}/redirect`, POST, development)).toEqual({ status: 302 });
    expect(seen.slice(before).map((s) => s.url)).toEqual(['/redirect']);
  });
});
