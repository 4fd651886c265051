import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '@portcullis/sandbox';
import { createUpstreamPool, UpstreamError, type UpstreamPool } from '../../services/gateway/src/clients/upstream-pool.ts';
import { MAX_UPSTREAM_ANSWER_BYTES } from '../../services/gateway/src/clients/upstream-session.ts';

const secret = randomBytes(32).toString('base64url');

function identityOf(result: { content: unknown }): string {
  return (JSON.parse((result.content as Array<{ text: string }>)[0]!.text) as { identity: { login: string } }).identity.login;
}

/** A small MCP upstream of our own: `answer` gives each request's JSON-RPC outcome; notifications get 202. */
async function startOwnUpstream(answer: (message: { id: number; method: string }) => Record<string, unknown>): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => { body += chunk; });
    req.on('end', () => {
      const message = JSON.parse(body) as { id?: number; method: string };
      if (message.id === undefined) { res.writeHead(202).end(); return; }
      res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 's1' })
        .end(JSON.stringify({ jsonrpc: '2.0', id: message.id, ...answer(message as { id: number; method: string }) }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

describe('upstream pool against the sandbox connectors', () => {
  let sandbox: Sandbox;
  let pool: UpstreamPool | undefined;
  beforeAll(async () => { sandbox = await startSandbox({ secret }); });
  afterEach(async () => { await pool?.close(); pool = undefined; });
  afterAll(async () => { await sandbox.close(); });

  const target = (memberId: string, login: string, service = 'github') => ({
    memberId, service, url: sandbox.upstreamUrl(service), accessToken: sandbox.issueToken(service, { login }),
  });

  it('keeps one session per (member, connector) and reuses it across calls', async () => {
    pool = createUpstreamPool({ timeoutMs: 5_000 });
    const ada = target('m-ada', 'ada');
    for (let i = 0; i < 3; i++) expect(identityOf(await pool.callTool(ada, 'get_me', {}))).toBe('ada');
    expect(pool.size).toBe(1);
    await pool.callTool(target('m-ada', 'ada', 'linear'), 'list_teams', {});
    await pool.callTool(target('m-bob', 'bob'), 'get_me', {});
    expect(pool.size).toBe(3);
  });

  it('opens a new session when the member\'s token changed', async () => {
    pool = createUpstreamPool({ timeoutMs: 5_000 });
    expect(identityOf(await pool.callTool(target('m-1', 'first'), 'get_me', {}))).toBe('first');
    expect(identityOf(await pool.callTool(target('m-1', 'second'), 'get_me', {}))).toBe('second');
    expect(pool.size).toBe(1);
  });

  it('closes the least recently used session beyond maxSessions', async () => {
    pool = createUpstreamPool({ timeoutMs: 5_000, maxSessions: 2 });
    await pool.callTool(target('m-a', 'a'), 'get_me', {});
    await pool.callTool(target('m-b', 'b'), 'get_me', {});
    await pool.callTool(target('m-a', 'a'), 'get_me', {}); // a is now the most recent
    await pool.callTool(target('m-c', 'c'), 'get_me', {});
    expect(pool.size).toBe(2);
  });

  it('queues calls beyond the per-session concurrency cap and serves them all', async () => {
    pool = createUpstreamPool({ timeoutMs: 10_000, maxConcurrentPerSession: 1 });
    const t = target('m-q', 'queued');
    const results = await Promise.all(Array.from({ length: 6 }, () => pool!.callTool(t, 'get_me', {})));
    expect(results.map(identityOf)).toEqual(Array(6).fill('queued'));
    expect(pool.size).toBe(1);
  });

  it('reports a refused token as unauthorized and an unreachable upstream as unreachable', async () => {
    pool = createUpstreamPool({ timeoutMs: 5_000 });
    const forged = { ...target('m-x', 'x'), accessToken: 'sbx_forged.token' };
    await expect(pool.callTool(forged, 'get_me', {})).rejects.toMatchObject({ name: 'UpstreamError', kind: 'unauthorized' });
    const nowhere = { ...target('m-y', 'y'), url: 'http://127.0.0.1:1/github/mcp' };
    const failure = await pool.callTool(nowhere, 'get_me', {}).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(UpstreamError);
    expect((failure as UpstreamError).kind).toBe('unreachable');
    expect((failure as UpstreamError).message).not.toMatch(/127\.0\.0\.1/);
  });

  it('re-opens a session the upstream forgot (it restarted) and the call succeeds', async () => {
    const port = Number(new URL(sandbox.url).port);
    pool = createUpstreamPool({ timeoutMs: 5_000 });
    const t = target('m-r', 'restarted');
    await pool.callTool(t, 'get_me', {});
    await sandbox.close();
    // Let the client notice the closed keep-alive sockets (a call on one would fail as unreachable).
    await new Promise((resolve) => setTimeout(resolve, 200));
    sandbox = await startSandbox({ secret, port });
    expect(identityOf(await pool.callTool(t, 'get_me', {}))).toBe('restarted');
  });

  it('closes sessions left idle', async () => {
    pool = createUpstreamPool({ timeoutMs: 5_000, idleMs: 100 });
    await pool.callTool(target('m-i', 'idle'), 'get_me', {});
    expect(pool.size).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 1_300));
    expect(pool.size).toBe(0);
  });

  it('does not keep a session whose initialize the upstream refused: the next call sets up a new one', async () => {
    // A small MCP server of our own whose first initialize fails (as an upstream still starting would).
    let initializes = 0;
    const upstream = await startOwnUpstream((message) => (message.method === 'initialize'
      ? (++initializes === 1
        ? { error: { code: -32603, message: 'warming up' } }
        : { result: { protocolVersion: '2025-06-18', capabilities: { tools: {} }, serverInfo: { name: 'flaky', version: '1' } } })
      : { result: { content: [{ type: 'text', text: 'ok' }] } }));
    try {
      pool = createUpstreamPool({ timeoutMs: 5_000 });
      const flaky = { memberId: 'm-f', service: 'github', url: upstream.url, accessToken: 't' };
      await expect(pool.callTool(flaky, 'get_me', {})).rejects.toBeInstanceOf(UpstreamError);
      expect(pool.size).toBe(0);
      expect(await pool.callTool(flaky, 'get_me', {})).toMatchObject({ content: [{ type: 'text', text: 'ok' }] });
      expect(initializes).toBe(2);
    } finally {
      await upstream.close();
    }
  });

  it('refuses an answer larger than MAX_UPSTREAM_ANSWER_BYTES, and the next call is served', async () => {
    // A server of our own whose first tools/call answers 1 MiB past the cap.
    let calls = 0;
    const upstream = await startOwnUpstream((message) => (message.method === 'initialize'
      ? { result: { protocolVersion: '2025-06-18', capabilities: { tools: {} }, serverInfo: { name: 'big', version: '1' } } }
      : { result: { content: [{ type: 'text', text: message.method === 'tools/call' && ++calls === 1 ? 'x'.repeat(MAX_UPSTREAM_ANSWER_BYTES + 1024 * 1024) : 'ok' }] } }));
    try {
      pool = createUpstreamPool({ timeoutMs: 10_000 });
      const big = { memberId: 'm-b', service: 'github', url: upstream.url, accessToken: 't' };
      const failure = await pool.callTool(big, 'get_me', {}).catch((err: unknown) => err);
      expect(failure).toMatchObject({ name: 'UpstreamError', kind: 'protocol' });
      expect((failure as Error).message).toMatch(/answer exceeds \d+ bytes/);
      expect(await pool.callTool(big, 'get_me', {})).toMatchObject({ content: [{ type: 'text', text: 'ok' }] });
    } finally {
      await upstream.close();
    }
  });
});
