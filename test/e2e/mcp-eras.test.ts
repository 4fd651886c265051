import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiClient } from '../support/api-client.ts';
import { connectMcp, connectMcpV2 } from '../support/mcp-client.ts';
import { MODERN_PROTOCOL_VERSION, rawModernMcp } from '../support/raw-modern-mcp.ts';
import { startSplitTopology, type SplitTopology } from '../support/split-topology.ts';
import { ownerAgentWithGithub } from '../support/owner-agent.ts';

/**
 * Issue 16: `/mcp` serves the stateless MCP revision 2026-07-28 beside the 2025 era's
 * sessions (decision 032). Two gateways on real Postgres, NATS and a decision point; a raw
 * 2026-07-28 client (fetch, no SDK) alternating between them, the SDK v1 client (2025
 * sessions) and the SDK v2 client (2026-07-28) list and call tools, are denied by a policy, hit
 * a session limit and see a reset start a fresh session.
 */
type CallResult = { isError?: boolean; content: Array<{ type: string; text: string }> };
type Entry = Record<string, unknown> & { id: string; sessionId?: string; tool: string; decision: string; reason: string };

const LIMIT_MESSAGE = 'Two lookups per session';
const DENY_MESSAGE = 'Commits are off limits here';

describe('/mcp serves both protocol eras (issue 16)', () => {
  let t: SplitTopology;
  let owner: ApiClient;
  let agentId: string;
  let ownerMemberId: string;
  let ownerKey: string;

  type SessionView = { id: string; clientName: string; clientVersion: string; protocolVersion: string; status: string; endReason: string | null };
  const sessionsOf = async (clientName: string, status = 'active'): Promise<SessionView[]> => {
    const res = await owner.call('GET', `/api/agents/${agentId}/sessions?status=${status}&limit=100`);
    expect(res.status, res.text).toBe(200);
    return res.body.sessions.filter((s: SessionView) => s.clientName === clientName);
  };
  const onlySessionOf = async (clientName: string): Promise<SessionView> => {
    const live = await sessionsOf(clientName);
    expect(live, `live sessions of ${clientName}`).toHaveLength(1);
    return live[0]!;
  };
  const reset = async (sessionId: string) => {
    const res = await owner.call('POST', `/api/agents/${agentId}/sessions/${sessionId}/reset`);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ id: sessionId, status: 'terminated', endReason: 'reset' });
  };
  /** Two calls allowed, the third refused by the session limit. */
  const hitLimit = async (getMe: () => Promise<CallResult>) => {
    expect((await getMe()).isError).toBeFalsy();
    expect((await getMe()).isError).toBeFalsy();
    const third = await getMe();
    expect(third.isError).toBe(true);
    expect(third.content[0]!.text).toBe(LIMIT_MESSAGE);
  };
  /** GET /api/audit?<query>, polled until `until` holds (entries arrive through the bus). */
  async function auditUntil(query: string, until: (entries: Entry[]) => boolean): Promise<Entry[]> {
    for (let i = 0; ; i++) {
      const res = await owner.call('GET', `/api/audit?${query}`);
      expect(res.status, res.text).toBe(200);
      if (until(res.body.entries) || i >= 100) return res.body.entries;
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  beforeAll(async () => {
    t = await startSplitTopology({ gatewayCount: 2 });
    ({ owner, agentId, ownerMemberId, ownerKey } = await ownerAgentWithGithub(t, { email: 'eras-owner@example.com', agentName: 'Eras agent' }));
    for (const policy of [
      { name: 'No commits', tools: ['list_commits'], denyMessage: DENY_MESSAGE },
      { name: 'Two lookups per session', tools: ['get_me'], denyMessage: LIMIT_MESSAGE, conditions: { sessionLimit: { maxCalls: 2 } } },
    ]) {
      const created = await owner.call('POST', `/api/agents/${agentId}/policies`, { service: 'github', effect: 'forbid', principal: { type: 'all_members' }, ...policy });
      expect(created.status, created.text).toBe(201);
    }
  });
  afterAll(async () => { await t?.stop(); });

  it('a raw 2026-07-28 client (no SDK) discovers, lists and calls on either replica, and is denied by a policy', async () => {
    const raw = rawModernMcp(t.gateways, ownerKey, { name: 'raw-2026', version: '0.1' });
    const discovered = await raw.request('server/discover');
    expect(discovered.status).toBe(200);
    expect(discovered.body.result).toMatchObject({
      supportedVersions: [MODERN_PROTOCOL_VERSION], capabilities: { tools: {} }, resultType: 'complete',
      _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'portcullis' } },
    });

    const listed = await raw.request('tools/list');
    expect(listed.status).toBe(200);
    expect(listed.body.result).toMatchObject({ resultType: 'complete', ttlMs: 0, cacheScope: 'private' });
    // The same tools, names and `_meta` as a 2025-era client sees.
    const { client } = await connectMcp(t.gateways[1]!, ownerKey);
    expect(listed.body.result.tools).toEqual((await client.listTools()).tools);
    await client.close();
    expect(listed.body.result.tools.find((tool: { name: string }) => tool.name === 'github__list_issues')._meta)
      .toEqual({ portcullis_service: 'github', portcullis_service_label: 'GitHub' });

    const issues = await raw.callTool('github__list_issues', { owner: 'acme', repo: 'api' });
    expect(issues.isError).toBeFalsy();
    expect(issues.resultType).toBe('complete');
    expect(JSON.parse(issues.content[0]!.text)).toMatchObject({ connector: 'github', tool: 'list_issues' });
    const denied = await raw.callTool('github__list_commits', { owner: 'acme', repo: 'api' });
    expect(denied).toMatchObject({ isError: true, content: [{ type: 'text', text: DENY_MESSAGE }], resultType: 'complete' });

    // Every request was served statelessly: no Mcp-Session-Id, and all of them form one tool session.
    const session = await onlySessionOf('raw-2026');
    expect(session).toMatchObject({ clientVersion: '0.1', protocolVersion: MODERN_PROTOCOL_VERSION, status: 'active' });
  });

  it('refuses what the 2026-07-28 transport forbids with 4xx, opening no session and forwarding nothing', async () => {
    const raw = rawModernMcp(t.gateways, ownerKey, { name: 'raw-refused', version: '1' });
    const call = { name: 'github__get_me', arguments: {} };
    const refusals: Array<[string, Promise<{ status: number; body: any }>, number, number]> = [
      ['Mcp-Name disagrees with params.name', raw.request('tools/call', call, { headers: { 'mcp-name': 'github__list_issues' } }), 400, -32020],
      ['no Mcp-Name', raw.request('tools/call', call, { headers: { 'mcp-name': null } }), 400, -32020],
      ['no Mcp-Method', raw.request('tools/call', call, { headers: { 'mcp-method': null } }), 400, -32020],
      ['Mcp-Method disagrees with the body', raw.request('tools/call', call, { headers: { 'mcp-method': 'tools/list' } }), 400, -32020],
      ['no MCP-Protocol-Version', raw.request('tools/call', call, { headers: { 'mcp-protocol-version': null } }), 400, -32020],
      ['MCP-Protocol-Version disagrees with _meta', raw.request('tools/call', call, { headers: { 'mcp-protocol-version': '2025-11-25' } }), 400, -32020],
      ['an unsupported version', raw.request('tools/call', call, { headers: { 'mcp-protocol-version': '2027-01-01' }, meta: { 'io.modelcontextprotocol/protocolVersion': '2027-01-01' } }), 400, -32022],
      ['no client capabilities', raw.request('tools/call', call, { meta: { 'io.modelcontextprotocol/clientCapabilities': undefined } }), 400, -32602],
      ['a session handle that is no string', raw.request('tools/call', call, { meta: { 'portcullis/sessionHandle': 42 } }), 400, -32602],
      ['tools/call params the SDK schema refuses (answered in band)', raw.request('tools/call', { name: 'github__get_me', arguments: 'not an object' }), 200, -32602],
      ['ping (removed in 2026-07-28)', raw.request('ping'), 404, -32601],
      ['initialize with a 2026-07-28 envelope', raw.request('initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '1' } }), 404, -32601],
      ['a batch holding a 2026-07-28 request', raw.post([{ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { ...call, _meta: raw.envelope() } }], 'tools/call', 'github__get_me'), 400, -32600],
    ];
    for (const [what, pending, status, code] of refusals) {
      const reply = await pending;
      expect(reply.status, what).toBe(status);
      expect(reply.body, what).toMatchObject({ jsonrpc: '2.0', error: { code } });
      expect(JSON.stringify(reply.body), what).not.toMatch(/at \S+\.(ts|js):\d+/); // no stack
    }
    const unsupported = await raw.request('tools/list', {}, { headers: { 'mcp-protocol-version': '2027-01-01' }, meta: { 'io.modelcontextprotocol/protocolVersion': '2027-01-01' } });
    expect(unsupported.body.error.data).toEqual({ supported: [MODERN_PROTOCOL_VERSION], requested: '2027-01-01' });
    // A 2026-07-28 header on a body without its envelope is not served as 2025 traffic either.
    const bare = await raw.post({ jsonrpc: '2.0', id: 7, method: 'tools/list', params: {} }, 'tools/list', undefined);
    expect(bare).toMatchObject({ status: 400, body: { error: { code: -32602 } } });
    // A notification is accepted and answered with nothing.
    const note = await raw.post({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1, _meta: raw.envelope() } }, 'notifications/cancelled', undefined);
    expect(note.status).toBe(202);

    expect(await sessionsOf('raw-refused', 'active')).toEqual([]);
    // Nothing refused reached the decision point or the audit log: the next allowed call is the client's only entry.
    const sentinel = rawModernMcp(t.gateways, ownerKey, { name: 'raw-refused', version: '1' });
    expect((await sentinel.callTool('github__get_me')).isError).toBeFalsy();
    const { id: sessionId } = await onlySessionOf('raw-refused');
    const entries = await auditUntil(`member=${ownerMemberId}`, (es) => es.some((e) => e.sessionId === sessionId));
    expect(entries.filter((e) => e.sessionId === sessionId)).toHaveLength(1);
  });

  it('a raw client\'s calls on both replicas form one session: it hits the limit, and a reset starts a fresh one', async () => {
    const raw = rawModernMcp(t.gateways, ownerKey, { name: 'raw-limit', version: '1' });
    const getMe = () => raw.callTool('github__get_me');
    await hitLimit(getMe);
    const first = await onlySessionOf('raw-limit');
    await reset(first.id);
    // No session to re-initialize in 2026-07-28: the stream's next call opens a fresh session with fresh counters.
    await hitLimit(getMe);
    const second = await onlySessionOf('raw-limit');
    expect(second.id).not.toBe(first.id);
    const ended = await sessionsOf('raw-limit', 'terminated');
    expect(ended.map((s) => s.id)).toEqual([first.id]);
  });

  it('a session handle in _meta gives a stream its own session and counters', async () => {
    const a = rawModernMcp(t.gateways, ownerKey, { name: 'raw-handles', version: '1' }, { sessionHandle: 'conversation-a' });
    const b = rawModernMcp(t.gateways, ownerKey, { name: 'raw-handles', version: '1' }, { sessionHandle: 'conversation-b' });
    await hitLimit(() => a.callTool('github__get_me'));
    expect((await b.callTool('github__get_me')).isError).toBeFalsy();
    expect((await sessionsOf('raw-handles')).length).toBe(2);
  });

  it('the SDK v1 client (2025 era, sessions) lists, calls, is denied, hits the limit; a reset ends its session', async () => {
    const { client, transport } = await connectMcp(t.gateways[0]!, ownerKey);
    expect((await client.listTools()).tools.some((tool) => tool.name === 'github__get_me')).toBe(true);
    const denied = await client.callTool({ name: 'github__list_commits', arguments: { owner: 'acme', repo: 'api' } }) as CallResult;
    expect(denied).toMatchObject({ isError: true, content: [{ text: DENY_MESSAGE }] });
    const getMe = () => client.callTool({ name: 'github__get_me', arguments: {} }) as Promise<CallResult>;
    await hitLimit(getMe);
    const sessionId = transport.sessionId!;
    await reset(sessionId);
    await expect(getMe()).rejects.toThrow(/404|not found/i);
    await client.close();
    const again = await connectMcp(t.gateways[1]!, ownerKey);
    expect(again.transport.sessionId).not.toBe(sessionId);
    await hitLimit(() => again.client.callTool({ name: 'github__get_me', arguments: {} }) as Promise<CallResult>);
    await again.client.close();
  });

  it('the SDK v2 client speaks 2026-07-28 (discover, no initialize): lists, calls, is denied, hits the limit and sees a reset', async () => {
    const client = await connectMcpV2(t.gateways[1]!, ownerKey, { pin: MODERN_PROTOCOL_VERSION }, 'sdk-v2-e2e');
    expect(client.getProtocolEra()).toBe('modern');
    expect(client.getNegotiatedProtocolVersion()).toBe(MODERN_PROTOCOL_VERSION);
    expect(client.getDiscoverResult()?.supportedVersions).toEqual([MODERN_PROTOCOL_VERSION]);
    expect((await client.listTools()).tools.some((tool) => tool.name === 'github__get_me')).toBe(true);
    const denied = await client.callTool({ name: 'github__list_commits', arguments: { owner: 'acme', repo: 'api' } }) as CallResult;
    expect(denied).toMatchObject({ isError: true, content: [{ text: DENY_MESSAGE }] });
    await expect(client.callTool({ name: 'nope', arguments: {} })).rejects.toMatchObject({ code: -32602 });
    const getMe = () => client.callTool({ name: 'github__get_me', arguments: {} }) as Promise<CallResult>;
    await hitLimit(getMe);
    const first = await onlySessionOf('sdk-v2-e2e');
    expect(first).toMatchObject({ clientVersion: '2.4.0', protocolVersion: MODERN_PROTOCOL_VERSION });
    await reset(first.id);
    await hitLimit(getMe); // the same client goes on: its next call opened a fresh session
    expect((await onlySessionOf('sdk-v2-e2e')).id).not.toBe(first.id);
    await client.close();

    // Negotiating ('auto') finds the stateless revision too; left at its default, it initializes (2025 era).
    const auto = await connectMcpV2(t.gateways[0]!, ownerKey, 'auto', 'sdk-v2-auto');
    expect(auto.getProtocolEra()).toBe('modern');
    await auto.close();
    const legacy = await connectMcpV2(t.gateways[0]!, ownerKey, 'legacy', 'sdk-v2-legacy');
    expect(legacy.getProtocolEra()).toBe('legacy');
    expect((await legacy.callTool({ name: 'github__get_me', arguments: {} }) as CallResult).isError).toBeFalsy();
    await legacy.close();
  });

  it('one call is audited alike in both eras, each entry naming its tool session', async () => {
    const raw = rawModernMcp(t.gateways, ownerKey, { name: 'raw-audit', version: '1' });
    expect((await raw.callTool('github__list_issues', { owner: 'acme', repo: 'audit' })).isError).toBeFalsy();
    const modernSession = (await onlySessionOf('raw-audit')).id;
    const { client, transport } = await connectMcp(t.gateways[0]!, ownerKey);
    expect((await client.callTool({ name: 'github__list_issues', arguments: { owner: 'acme', repo: 'audit' } }) as CallResult).isError).toBeFalsy();
    const legacySession = transport.sessionId!;
    await client.close();

    const done = (e: Entry | undefined) => e !== undefined && !/outcome not recorded/.test(e.reason);
    const entries = await auditUntil(`member=${ownerMemberId}`, (es) => [modernSession, legacySession].every((id) => done(es.find((e) => e.sessionId === id))));
    const modern = entries.find((e) => e.sessionId === modernSession)!;
    const legacy = entries.find((e) => e.sessionId === legacySession)!;
    const comparable = ({ id: _id, timestamp: _ts, sessionId: _s, durationMs: _d, traceparent: _tp, ...rest }: Entry) => rest;
    expect(comparable(modern)).toEqual(comparable(legacy));
    expect(modern).toMatchObject({ tool: 'list_issues', decision: 'ALLOW' });
  });
});
