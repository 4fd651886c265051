import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import { startSandbox, type Sandbox } from '@portcullis/sandbox';
import { createUpstreamPool, type UpstreamPool } from '../../services/gateway/src/clients/upstream-pool.ts';
import { MODERN_UPSTREAM_VERSION, UpstreamSession } from '../../services/gateway/src/clients/upstream-session.ts';

/** What an upstream saw of one request. */
interface Seen { method: string; headers: Record<string, string | undefined>; meta: Record<string, unknown> | undefined }

const readBody = (req: IncomingMessage) => new Promise<string>((resolve) => {
  let body = '';
  req.on('data', (chunk) => { body += chunk; });
  req.on('end', () => resolve(body));
});

/** Serves `handle` on a loopback port and records every JSON-RPC request it is sent. */
async function startUpstream(handle: (body: string, req: IncomingMessage) => Promise<{ status: number; headers: Record<string, string>; body: string }>) {
  const seen: Seen[] = [];
  const server = createServer(async (req, res) => {
    const body = await readBody(req);
    try {
      const message = JSON.parse(body) as { method?: string; params?: { _meta?: Record<string, unknown> } };
      seen.push({
        method: message.method ?? '',
        headers: { 'mcp-method': req.headers['mcp-method'] as string | undefined, 'mcp-name': req.headers['mcp-name'] as string | undefined, 'mcp-protocol-version': req.headers['mcp-protocol-version'] as string | undefined, authorization: req.headers.authorization },
        meta: message.params?._meta,
      });
    } catch { /* not JSON: the handler answers it */ }
    const answer = await handle(body, req);
    res.writeHead(answer.status, answer.headers).end(answer.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    seen,
    close: () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

/** A real MCP server of the SDK's second major version (serves 2026-07-28, and 2025-era requests statelessly). */
function sdkV2Upstream() {
  const handler = createMcpHandler(() => {
    const server = new McpServer({ name: 'modern-upstream', version: '1.0.0' });
    server.registerTool('echo', { description: 'Echoes its text', inputSchema: z.object({ text: z.string() }) }, async ({ text }) => ({
      content: [{ type: 'text', text: `echo: ${text}` }],
      structuredContent: undefined,
      _meta: { 'example.com/tag': 'kept' },
    }));
    return server;
  });
  return startUpstream(async (body, req) => {
    const request = new Request(`http://127.0.0.1${req.url}`, {
      method: req.method!, body,
      headers: Object.entries(req.headers).flatMap(([key, value]) => (typeof value === 'string' ? [[key, value] as [string, string]] : [])),
    });
    const response = await handler.fetch(request);
    return { status: response.status, headers: Object.fromEntries(response.headers), body: await response.text() };
  });
}

describe('upstreams that speak MCP 2026-07-28', () => {
  let pool: UpstreamPool | undefined;
  afterEach(async () => { await pool?.close(); pool = undefined; });

  it('are called statelessly: server/discover once per upstream, then tools/call with the envelope and headers, no initialize', async () => {
    const upstream = await sdkV2Upstream();
    try {
      pool = createUpstreamPool({ timeoutMs: 5_000 });
      const ada = { memberId: 'm-ada', service: 'github', url: upstream.url, accessToken: 'token-ada' };
      const bob = { memberId: 'm-bob', service: 'github', url: upstream.url, accessToken: 'token-bob' };
      const first = await pool.callTool(ada, 'echo', { text: 'one' });
      await pool.callTool(ada, 'echo', { text: 'two' });
      await pool.callTool(bob, 'echo', { text: 'three' });

      // The tool's result as a 2025-era upstream would give it: the exchange's fields are not passed on.
      expect(first).toEqual({ content: [{ type: 'text', text: 'echo: one' }], _meta: { 'example.com/tag': 'kept' } });
      expect(first).not.toHaveProperty('resultType');

      expect(upstream.seen.map((s) => s.method)).toEqual(['server/discover', 'tools/call', 'tools/call', 'tools/call']);
      const calls = upstream.seen.filter((s) => s.method === 'tools/call');
      for (const call of calls) {
        expect(call.headers).toMatchObject({ 'mcp-method': 'tools/call', 'mcp-name': 'echo', 'mcp-protocol-version': MODERN_UPSTREAM_VERSION });
        expect(call.meta).toMatchObject({ 'io.modelcontextprotocol/protocolVersion': MODERN_UPSTREAM_VERSION, 'io.modelcontextprotocol/clientCapabilities': {} });
      }
      // Each member's own token, on every request.
      expect(calls.map((c) => c.headers.authorization)).toEqual(['Bearer token-ada', 'Bearer token-ada', 'Bearer token-bob']);
    } finally {
      await upstream.close();
    }
  });

  it('pass the upstream\'s JSON-RPC errors on as they are', async () => {
    const upstream = await sdkV2Upstream();
    try {
      pool = createUpstreamPool({ timeoutMs: 5_000 });
      const target = { memberId: 'm-e', service: 'github', url: upstream.url, accessToken: 't' };
      const result = await pool.callTool(target, 'echo', { text: 42 }).catch((err: unknown) => err);
      // The SDK answers invalid arguments with a tool error result (or a JSON-RPC error): either way nothing is invented.
      if (result instanceof Error) expect(result.message).toMatch(/text|invalid/i);
      else expect(result).toMatchObject({ isError: true });
    } finally {
      await upstream.close();
    }
  });

  it('falls back to a fresh 2025-era session when the upstream stops serving 2026-07-28', async () => {
    // Our own server: answers discovery as a 2026-07-28 server, then refuses that revision as a downgraded one would.
    let modern = true;
    const upstream = await startUpstream(async (body, req) => {
      const message = JSON.parse(body) as { id?: number; method: string };
      const json = (status: number, payload: object, headers: Record<string, string> = {}) =>
        ({ status, headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ jsonrpc: '2.0', id: message.id, ...payload }) });
      if (message.id === undefined) return { status: 202, headers: {}, body: '' };
      if (message.method === 'server/discover') {
        return modern ? json(200, { result: { supportedVersions: [MODERN_UPSTREAM_VERSION], capabilities: { tools: {} }, serverInfo: { name: 'x', version: '1' }, resultType: 'complete' } }) : json(400, { error: { code: -32601, message: 'Method not found' } });
      }
      if (message.method === 'initialize') return json(200, { result: { protocolVersion: '2025-06-18', capabilities: { tools: {} }, serverInfo: { name: 'x', version: '1' } } }, { 'mcp-session-id': 's1' });
      if (modern) return json(200, { result: { content: [{ type: 'text', text: 'modern' }], resultType: 'complete' } });
      if (req.headers['mcp-session-id'] === 's1') return json(200, { result: { content: [{ type: 'text', text: 'legacy' }] } });
      return json(400, { error: { code: -32022, message: 'Unsupported protocol version', data: { supported: ['2025-06-18'] } } });
    });
    try {
      pool = createUpstreamPool({ timeoutMs: 5_000 });
      const target = { memberId: 'm-d', service: 'github', url: upstream.url, accessToken: 't' };
      expect(await pool.callTool(target, 'echo', {})).toEqual({ content: [{ type: 'text', text: 'modern' }] });
      modern = false;
      // The refused call is made again on a new 2025-era session and succeeds.
      expect(await pool.callTool(target, 'echo', {})).toEqual({ content: [{ type: 'text', text: 'legacy' }] });
      expect(upstream.seen.map((s) => s.method)).toEqual([
        'server/discover', 'tools/call', 'tools/call', 'initialize', 'notifications/initialized', 'tools/call',
      ]);
    } finally {
      await upstream.close();
    }
  });

  it('refuses a result that asks for more input rather than passing on half an exchange', async () => {
    const upstream = await startUpstream(async (body) => {
      const message = JSON.parse(body) as { id?: number; method: string };
      const result = message.method === 'server/discover'
        ? { supportedVersions: [MODERN_UPSTREAM_VERSION], capabilities: { tools: {} }, serverInfo: { name: 'x', version: '1' }, resultType: 'complete' }
        : { resultType: 'input_required', inputRequests: {} };
      return { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: message.id, result }) };
    });
    try {
      pool = createUpstreamPool({ timeoutMs: 5_000 });
      const target = { memberId: 'm-i', service: 'github', url: upstream.url, accessToken: 't' };
      await expect(pool.callTool(target, 'echo', {})).rejects.toMatchObject({ name: 'UpstreamError', message: expect.stringMatching(/asked for more input/) });
    } finally {
      await upstream.close();
    }
  });
});

describe('upstreams of the 2025 era (the sandbox connectors, SDK v1)', () => {
  let sandbox: Sandbox;
  const secret = randomBytes(32).toString('base64url');
  beforeAll(async () => { sandbox = await startSandbox({ secret }); });
  afterAll(async () => { await sandbox.close(); });

  it('are found not to serve 2026-07-28 and get initialize, once per session', async () => {
    const session = new UpstreamSession(sandbox.upstreamUrl('github'), sandbox.issueToken('github', { login: 'ada' }), 5_000);
    await session.ready;
    expect(session.era).toBe('legacy');
    const result = await session.callTool('get_me', {}, Date.now() + 5_000);
    expect(JSON.parse((result.content as Array<{ text: string }>)[0]!.text)).toMatchObject({ identity: { login: 'ada' } });
  });

  it('refuse a wrong token at discovery as at initialize: the caller sees unauthorized', async () => {
    const pool = createUpstreamPool({ timeoutMs: 5_000 });
    try {
      const forged = { memberId: 'm-f', service: 'linear', url: sandbox.upstreamUrl('linear'), accessToken: 'sbx_forged.token' };
      await expect(pool.callTool(forged, 'list_teams', {})).rejects.toMatchObject({ name: 'UpstreamError', kind: 'unauthorized' });
    } finally {
      await pool.close();
    }
  });
});
