import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { isConnectorKey, isolatingFetch, isProtocolRequest } from '@portcullis/core';
import type { ApiClient } from '../support/api-client.ts';
import { addMember } from '../support/fixtures.ts';
import { startSplitTopology, type SplitTopology } from '../support/split-topology.ts';
import { ownerAgentWithGithub } from '../support/owner-agent.ts';

/**
 * Issue 15, the `/mcp` endpoint: Origin and Host checks (item 3), a pending member hears that
 * they are pending (item 10), unknown tools are audited (item 11), and requests that are not
 * tool calls are audited under their own kind and not counted as calls (item 16). Real
 * gateway, policy and audit processes on Postgres and NATS; the official MCP SDK client.
 */
type CallResult = { isError?: boolean; content: Array<{ text: string }> };
interface Entry { id: string; service: string; tool: string; action: string; resource: string; decision: string; reason: string; memberId: string; matchedPolicyIds: string[] }

const IDE_ORIGIN = 'https://ide.example.com';
const INIT = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };

/** The MCP SDK client with extra request headers (a browser-hosted client sends its Origin). */
async function connectWith(baseUrl: string, memberKey: string, headers: Record<string, string> = {}) {
  const client = new Client({ name: 'hardening-e2e', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`), {
    fetch: isolatingFetch, requestInit: { headers: { Authorization: `Bearer ${memberKey}`, ...headers } },
  });
  await client.connect(transport);
  return { client, transport };
}

/** One raw HTTP request to `/mcp` with exactly these headers (fetch cannot set `Host`). */
function rawMcp(baseUrl: string, method: string, headers: Record<string, string>, body?: unknown): Promise<{ status: number; body: any; sessionId: string | undefined }> {
  const url = new URL(`${baseUrl}/mcp`);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      host: url.hostname, port: url.port, path: url.pathname, method,
      headers: { accept: 'application/json, text/event-stream', ...(payload ? { 'content-type': 'application/json' } : {}), ...headers },
    }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => { text += chunk; });
      res.on('end', () => {
        let parsed: unknown;
        try { parsed = text ? JSON.parse(text) : undefined; } catch { parsed = text; }
        const sessionId = res.headers['mcp-session-id'];
        resolve({ status: res.statusCode ?? 0, body: parsed, sessionId: Array.isArray(sessionId) ? sessionId[0] : sessionId });
      });
    });
    req.on('error', reject);
    req.end(payload);
  });
}

describe('/mcp hardening (issue 15: items 3, 10, 11, 16)', () => {
  let t: SplitTopology;
  let gateway: string;
  let owner: ApiClient;
  let agentId: string;
  let ownerMemberId: string;
  let ownerKey: string;

  const bearer = () => ({ authorization: `Bearer ${ownerKey}` });
  /** GET /api/audit?<query>, polled until `until` holds (entries arrive through the bus). */
  async function auditUntil(query: string, until: (entries: Entry[]) => boolean): Promise<{ entries: Entry[]; total: number }> {
    for (let i = 0; ; i++) {
      const res = await owner.call('GET', `/api/audit?${query}`);
      expect(res.status, res.text).toBe(200);
      if (until(res.body.entries) || i >= 100) return res.body;
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  beforeAll(async () => {
    t = await startSplitTopology({ gatewayEnv: { MCP_ALLOWED_ORIGINS: IDE_ORIGIN } });
    gateway = t.gateways[0]!;
    ({ owner, agentId, ownerMemberId, ownerKey } = await ownerAgentWithGithub(t, { email: 'hardening-owner@example.com', agentName: 'Hardening agent' }));
  });
  afterAll(async () => { await t?.stop(); });

  it('item 3: a present Origin that is not allowed, "null", or a foreign Host is 403 before anything else; allowed origins are served', async () => {
    const sessionsBefore = (await owner.call('GET', `/api/agents/${agentId}/sessions`)).body.total;
    for (const origin of ['http://evil.example', 'null', 'http://127.0.0.1.evil.example']) {
      const refused = await rawMcp(gateway, 'POST', { ...bearer(), origin }, INIT);
      expect(refused.status, origin).toBe(403);
      expect(refused.body).toMatchObject({ jsonrpc: '2.0', error: { code: -32003, message: expect.stringContaining(JSON.stringify(origin)) }, id: null });
    }
    // Before the key is looked at: no key, still 403 (not 401).
    expect((await rawMcp(gateway, 'POST', { origin: 'http://evil.example' }, INIT)).status).toBe(403);
    await expect(connectWith(gateway, ownerKey, { origin: 'http://evil.example' })).rejects.toThrow(/403|not accepted/);

    // The gateway listens on loopback: a rebound name in Host is refused, whatever the Origin.
    const port = new URL(gateway).port;
    for (const host of [`evil.example:${port}`, `evil.example`]) {
      const refused = await rawMcp(gateway, 'POST', { ...bearer(), host }, INIT);
      expect(refused.status, host).toBe(403);
      expect(refused.body).toMatchObject({ error: { code: -32003, message: expect.stringMatching(/host/) }, id: null });
    }
    expect((await rawMcp(gateway, 'POST', { ...bearer(), host: `localhost:${port}` }, INIT)).status).toBe(200);
    // Refusals opened no session (only the localhost initialize above did).
    expect((await owner.call('GET', `/api/agents/${agentId}/sessions`)).body.total).toBe(sessionsBefore + 1);

    // Served: no Origin, the public URL's origin, a configured one, a loopback one (not production).
    for (const headers of [{}, { origin: gateway }, { origin: IDE_ORIGIN }, { origin: 'http://localhost:5173' }] as Array<Record<string, string>>) {
      const { client, transport } = await connectWith(gateway, ownerKey, headers);
      expect((await client.listTools()).tools.some((tool) => tool.name === 'github__get_me'), JSON.stringify(headers)).toBe(true);
      await transport.terminateSession();
      await client.close();
    }
  });

  it('initialize with control characters in clientInfo is served, not a 500: they are not stored', async () => {
    const init = { ...INIT, params: { ...INIT.params, clientInfo: { name: 'bad\u0000client\u0007', version: '1\u0000' } } };
    const opened = await rawMcp(gateway, 'POST', bearer(), init);
    expect(opened.status, JSON.stringify(opened.body)).toBe(200);
    const session = (await owner.call('GET', `/api/agents/${agentId}/sessions?limit=100`)).body.sessions.find((s: { id: string }) => s.id === opened.sessionId);
    expect(session).toMatchObject({ clientName: 'badclient', clientVersion: '1' });
  });

  it('item 10: a pending member is told they are pending approval, before any connector check', async () => {
    const pending = await addMember(t.database.db, { agentId, email: 'waiting@example.com', status: 'pending', connect: {} });
    const { client, transport } = await connectWith(gateway, pending.memberKey);
    for (const name of ['github__get_me', 'github__list_issues']) {
      const result = await client.callTool({ name, arguments: {} }) as CallResult;
      expect(result.isError).toBe(true);
      expect(result.content[0]!.text).toBe('Member is pending approval');
    }
    await transport.terminateSession();
    await client.close();
    const { entries } = await auditUntil(`member=${pending.memberId}`, (es) => es.length >= 2);
    expect(entries).toHaveLength(2);
    for (const entry of entries) {
      expect(entry).toMatchObject({ decision: 'DENY', service: 'github', reason: 'Member is pending approval', matchedPolicyIds: ['portcullis.member-not-approved'] });
    }
  });

  it('item 11: unknown tool names stay a -32602 error for the client and are audited as denied calls', async () => {
    const longName = `nope__${'x'.repeat(5_000)}`;
    const { client, transport } = await connectWith(gateway, ownerKey);
    for (const name of ['nope__x', 'github__no_such_tool', 'get_me', longName]) {
      await expect(client.callTool({ name, arguments: { a: 1 } })).rejects.toMatchObject({ code: -32602, message: expect.stringContaining('Unknown tool') });
    }
    // A real tool of a connector the agent has not enabled: a denied tool result, audited.
    const notEnabled = await client.callTool({ name: 'slack__slack_search_channels', arguments: {} }) as CallResult;
    expect(notEnabled.isError).toBe(true);
    expect(notEnabled.content[0]!.text).toBe('Slack is not enabled on this agent');
    const sessionId = transport.sessionId;
    await transport.terminateSession();
    await client.close();

    const { entries } = await auditUntil(`member=${ownerMemberId}&result=DENY`, (es) => es.filter((e) => /^Unknown tool/.test(e.reason)).length >= 4 && es.some((e) => e.service === 'slack'));
    const unknown = entries.filter((e) => /^Unknown tool/.test(e.reason));
    // A prefix that names a connector files the entry under it, with its Cedar action (decision 071).
    expect(unknown.map((e) => e.tool).sort()).toEqual(['get_me', 'no_such_tool', longName.slice(0, 200), 'nope__x'].sort());
    for (const entry of unknown) {
      const named = entry.tool === 'no_such_tool'
        ? { service: 'github', action: 'GithubMCP::Action::"no_such_tool"', resource: 'GithubMCP::Service::"github"' }
        : { service: '', action: 'Portcullis::Action::"tools/call"', resource: `Portcullis::Agent::"${agentId}"` };
      expect(entry).toMatchObject({
        ...named, decision: 'DENY', matchedPolicyIds: [],
        reason: `Unknown tool ${JSON.stringify(named.service ? `${named.service}__${entry.tool}` : entry.tool)}. Tool names are <service>__<tool>, exactly as tools/list shows them.`,
      });
      expect((entry as Entry & { sessionId?: string }).sessionId).toBe(sessionId);
    }
    expect(entries.find((e) => e.service === 'slack')).toMatchObject({ tool: 'slack_search_channels', decision: 'DENY', reason: 'Slack is not enabled on this agent' });
    // Unknown names are calls: they count in the dashboard.
    const stats = await owner.call('GET', '/api/dashboard/stats');
    const all = await auditUntil('limit=500', () => true);
    const protocol = all.entries.filter((e) => isProtocolRequest(e.action));
    expect(stats.body.calls).toBe(all.total - protocol.length);
  });

  it('item 16: requests of a disabled agent that are not tool calls are audited under the proxy\'s own action, with no service, and not counted as calls', async () => {
    expect(isConnectorKey('mcp')).toBe(false);
    const opened = await rawMcp(gateway, 'POST', bearer(), INIT);
    expect(opened.status).toBe(200);
    const session = { ...bearer(), 'mcp-session-id': opened.sessionId!, 'mcp-protocol-version': '2025-06-18' };

    expect((await owner.call('PUT', `/api/agents/${agentId}/status`, { status: 'disabled' })).status).toBe(200);
    // Pings until the gateway has heard of the change through the bus; the refused one is audited.
    for (let i = 0; i < 50 && (await rawMcp(gateway, 'POST', session, { jsonrpc: '2.0', id: 0, method: 'ping' })).status !== 403; i++) {
      await new Promise((r) => setTimeout(r, 100));
    }
    const answers = [
      await rawMcp(gateway, 'POST', bearer(), INIT),
      await rawMcp(gateway, 'POST', session, { jsonrpc: '2.0', id: 2, method: 'tools/list' }),
      await rawMcp(gateway, 'DELETE', session),
      await rawMcp(gateway, 'GET', session),
      await rawMcp(gateway, 'POST', session, { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'github__get_me', arguments: {} } }),
    ];
    expect(answers.map((a) => a.status)).toEqual([403, 403, 403, 403, 403]);
    expect(answers[4]!.body).toMatchObject({ error: { code: -32003 }, id: 3 });

    const byTool = (es: Entry[]) => es.filter((e) => e.reason === 'Agent is disabled');
    const { entries } = await auditUntil(`member=${ownerMemberId}`, (es) => ['ping', 'initialize', 'tools/list', 'HTTP DELETE', 'HTTP GET', 'get_me'].every((tool) => byTool(es).some((e) => e.tool === tool)));
    const refused = byTool(entries);
    const requests = refused.filter((e) => isProtocolRequest(e.action));
    expect(requests.map((e) => e.tool)).toEqual(expect.arrayContaining(['initialize', 'tools/list', 'HTTP DELETE', 'HTTP GET', 'ping']));
    for (const entry of requests) {
      expect(entry).toMatchObject({ service: '', decision: 'DENY', action: `Portcullis::Action::${JSON.stringify(entry.tool)}`, resource: `Portcullis::Agent::"${agentId}"` });
    }
    expect(refused.find((e) => e.tool === 'get_me')).toMatchObject({ service: 'github', action: 'GithubMCP::Action::"get_me"', decision: 'DENY' });

    // The counters count tool calls only: every entry but the protocol requests.
    const all = await auditUntil('limit=500', () => true);
    const protocol = all.entries.filter((e) => isProtocolRequest(e.action));
    expect(protocol.length).toBeGreaterThanOrEqual(5);
    const stats = await owner.call('GET', '/api/dashboard/stats');
    expect(stats.status).toBe(200);
    expect(stats.body.calls).toBe(all.total - protocol.length);
    expect(stats.body.allowed + stats.body.denied).toBe(stats.body.calls);
    const members = await owner.call('GET', `/api/dashboard/member-stats?agentId=${agentId}`);
    expect(members.status).toBe(200);
    const ownerRow = members.body.members.find((m: { memberId: string }) => m.memberId === ownerMemberId);
    const ownerAll = await auditUntil(`limit=500&member=${ownerMemberId}`, () => true);
    expect(ownerRow.calls).toBe(ownerAll.total - ownerAll.entries.filter((e) => isProtocolRequest(e.action)).length);
    expect(members.body.members.reduce((n: number, m: { calls: number }) => n + m.calls, 0)).toBe(stats.body.calls);

    expect((await owner.call('PUT', `/api/agents/${agentId}/status`, { status: 'active' })).status).toBe(200);
  });
});
