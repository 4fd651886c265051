import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { isolatingFetch } from '@portcullis/core';
import { apiClient, signInThroughOutbox, type ApiClient } from '../support/api-client.ts';
import { addMember, sandboxTokenIssuer } from '../support/fixtures.ts';
import { startSplitTopology, type SplitTopology } from '../support/split-topology.ts';

/**
 * Issue 7: a tool session belongs to the agent's member, not to a gateway process. Two
 * gateways, each with its own decision point, on real Postgres and NATS, no balancer: the
 * test's own MCP SDK client sends each request of one session to the next gateway in turn, so
 * the session's limit counters are shared by two PDPs through JetStream KV.
 */
type CallResult = { isError?: boolean; content: Array<{ text: string }> };

/** An MCP SDK client whose requests alternate between `gateways` (round robin, per request). */
async function alternatingClient(gateways: string[], memberKey: string) {
  let turn = 0;
  const hits = gateways.map(() => 0);
  const roundRobin: typeof fetch = (input, init) => {
    const i = turn++ % gateways.length;
    hits[i]! += 1;
    const url = new URL(String(input instanceof Request ? input.url : input));
    const target = new URL(gateways[i]!);
    url.host = target.host;
    return isolatingFetch(url, init);
  };
  const client = new Client({ name: 'alternating-e2e', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${gateways[0]}/mcp`), {
    fetch: roundRobin,
    requestInit: { headers: { Authorization: `Bearer ${memberKey}` } },
  });
  await client.connect(transport);
  return { client, transport, hits };
}

describe('tool sessions served by any replica', () => {
  let t: SplitTopology;
  let owner: ApiClient;
  let agentId: string;
  let ownerKey: string;
  let member: Awaited<ReturnType<typeof addMember>>;
  let memberApi: ApiClient;
  let policyId: string;
  const MEMBER_EMAIL = 'session-member@example.com';

  const getMe = (client: Client) => client.callTool({ name: 'github__get_me', arguments: {} }) as Promise<CallResult>;
  const limitPolicy = (denyMessage: string) => ({
    name: 'Three lookups per session', service: 'github', effect: 'forbid', principal: { type: 'all_members' },
    tools: ['get_me'], denyMessage, conditions: { sessionLimit: { maxCalls: 3 } },
  });

  beforeAll(async () => {
    t = await startSplitTopology({ gatewayCount: 2, policyCount: 2 });
    owner = apiClient(t.gateways[0]!);
    await signInThroughOutbox(owner, t.outboxDir, 'session-owner@example.com');
    agentId = (await owner.call('POST', '/api/agents', { name: 'Session agent' })).body.id;
    expect((await owner.call('PUT', `/api/agents/${agentId}/services`, { services: ['github'] })).status).toBe(200);
    const issue = sandboxTokenIssuer(t.sandboxUrl);
    member = await addMember(t.database.db, { agentId, email: MEMBER_EMAIL, status: 'approved', connect: { github: await issue('github', { login: 'sam', name: 'Sam' }) } });
    const ownerMembership = (await owner.call('GET', `/api/agents/${agentId}`)).body.membership.id;
    ownerKey = (await owner.call('PUT', `/api/agents/${agentId}/members/${ownerMembership}/key`, {})).body.key;
    // The owner's own GitHub connection, through the same fixture path (a sealed sandbox token).
    const { schema, sealToMember } = await import('@portcullis/core');
    const { eq } = await import('drizzle-orm');
    const [row] = await t.database.db.select().from(schema.members).where(eq(schema.members.id, ownerMembership));
    await t.database.db.insert(schema.connections).values({
      memberId: ownerMembership, service: 'github', identityInfo: { login: 'olive' },
      sealedTokens: sealToMember(row!.vaultPublicKey!, JSON.stringify({ accessToken: await issue('github', { login: 'olive', name: 'Olive' }) })),
    });
    memberApi = apiClient(t.gateways[1]!);
    await signInThroughOutbox(memberApi, t.outboxDir, MEMBER_EMAIL);
    const created = await owner.call('POST', `/api/agents/${agentId}/policies`, limitPolicy('Session limit reached'));
    expect(created.status, created.text).toBe(201);
    policyId = created.body.id;
  });
  afterAll(async () => { await t?.stop(); });

  it('one session alternates between both gateways (and decision points); a limit of 3 admits exactly 3 of 8 racing calls across them', async () => {
    const { client, transport, hits } = await alternatingClient(t.gateways, ownerKey);
    const { tools } = await client.listTools();
    expect(tools.some((tool) => tool.name === 'github__get_me')).toBe(true);
    const results = await Promise.all(Array.from({ length: 8 }, () => getMe(client)));
    expect(results.filter((r) => !r.isError)).toHaveLength(3);
    expect(results.filter((r) => r.isError).every((r) => r.content[0]!.text === 'Session limit reached')).toBe(true);
    expect(hits.every((n) => n >= 4)).toBe(true);

    const sessions = await owner.call('GET', `/api/agents/${agentId}/sessions?status=active`);
    expect(sessions.status).toBe(200);
    expect(sessions.body.sessions.find((s: { id: string }) => s.id === transport.sessionId)).toMatchObject({
      status: 'active', clientName: 'alternating-e2e', clientVersion: '1.0.0', memberEmail: 'session-owner@example.com',
    });
    await client.close();
  });

  it('editing the limited policy keeps the session\'s count', async () => {
    const { client } = await alternatingClient(t.gateways, ownerKey);
    expect((await getMe(client)).isError).toBeFalsy();
    expect((await getMe(client)).isError).toBeFalsy();
    const edited = await owner.call('PUT', `/api/agents/${agentId}/policies/${policyId}`, limitPolicy('Still three per session'));
    expect(edited.status, edited.text).toBe(200);
    await new Promise((r) => setTimeout(r, 300)); // both replicas pick up the new version
    expect((await getMe(client)).isError).toBeFalsy();
    const fourth = await getMe(client);
    expect(fourth.isError).toBe(true);
    expect(fourth.content[0]!.text).toBe('Still three per session');
    await client.close();
  });

  it('reset from the API: the next request on either replica is 404; the re-initialized client starts fresh', async () => {
    const { client, transport } = await alternatingClient(t.gateways, ownerKey);
    for (let i = 0; i < 3; i++) expect((await getMe(client)).isError).toBeFalsy();
    expect((await getMe(client)).isError).toBe(true);
    const sessionId = transport.sessionId!;

    const reset = await owner.call('POST', `/api/agents/${agentId}/sessions/${sessionId}/reset`);
    expect(reset.status, reset.text).toBe(200);
    expect(reset.body).toMatchObject({ id: sessionId, status: 'terminated', endReason: 'reset' });
    for (const gateway of t.gateways) {
      const res = await fetch(`${gateway}/mcp`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ownerKey}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-06-18' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list', params: {} }),
      });
      expect(res.status).toBe(404);
      await res.body?.cancel();
    }
    await expect(getMe(client)).rejects.toThrow(/404|not found/i);
    await client.close();

    const again = await alternatingClient(t.gateways, ownerKey);
    expect(again.transport.sessionId).not.toBe(sessionId);
    for (let i = 0; i < 3; i++) expect((await getMe(again.client)).isError).toBeFalsy();
    await again.client.close();
  });

  it('a member sees only their own sessions; activity counts equal what the audit store holds', async () => {
    const { client, transport } = await alternatingClient(t.gateways, member.memberKey);
    await getMe(client);
    await client.callTool({ name: 'github__list_issues', arguments: { owner: 'acme', repo: 'api' } });
    await getMe(client);
    const sessionId = transport.sessionId!;
    await client.close();

    const mine = await memberApi.call('GET', `/api/agents/${agentId}/my-sessions`);
    expect(mine.status).toBe(200);
    expect(mine.body.sessions.map((s: { id: string }) => s.id)).toEqual([sessionId]);
    expect(mine.body.total).toBe(1);
    expect((await memberApi.call('GET', `/api/agents/${agentId}/sessions`)).status).toBe(403);

    // The audit store's own view of that session, read through the audit API.
    let entries: Array<{ sessionId?: string; tool: string; decision: string; reason: string }> = [];
    for (let i = 0; i < 40; i++) {
      const res = await owner.call('GET', `/api/audit?member=${member.memberId}`);
      entries = res.body.entries.filter((e: { sessionId?: string }) => e.sessionId === sessionId);
      if (entries.length === 3 && entries.every((e) => !/outcome not recorded/.test(e.reason))) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(entries).toHaveLength(3);
    const activity = await memberApi.call('GET', `/api/agents/${agentId}/sessions/${sessionId}/activity`);
    expect(activity.status, activity.text).toBe(200);
    expect(activity.body).toMatchObject({
      calls: entries.length,
      allowed: entries.filter((e) => e.decision === 'ALLOW').length,
      denied: entries.filter((e) => e.decision === 'DENY').length,
    });
    const byTool = Object.fromEntries(activity.body.tools.map((tool: { tool: string; calls: number }) => [tool.tool, tool.calls]));
    expect(byTool).toEqual({ get_me: 2, list_issues: 1 });
    expect(activity.body.policies).toEqual([]); // a session-limit forbid that never matched
    // Every field survives the routes' response schemas (decision 045).
    const SESSION_FIELDS = ['agentId', 'clientName', 'clientVersion', 'createdAt', 'endReason', 'endedAt', 'id', 'keyId', 'lastSeenAt', 'memberEmail', 'memberId', 'protocolVersion', 'status'];
    expect(Object.keys(activity.body).sort()).toEqual(['allowed', 'calls', 'denied', 'firstCallAt', 'lastCallAt', 'policies', 'session', 'tools']);
    expect(Object.keys(activity.body.session).sort()).toEqual(SESSION_FIELDS);
    expect(Object.keys(mine.body.sessions[0]).sort()).toEqual(SESSION_FIELDS);
    expect(activity.body.session).toMatchObject({ id: sessionId, agentId, memberId: member.memberId });
    expect(activity.body.firstCallAt).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(Object.keys(activity.body.tools[0]).sort()).toEqual(['allowed', 'calls', 'denied', 'service', 'tool']);
  });

  it('bad ids are 400, foreign sessions 404, and a refused reset changes nothing', async () => {
    const { client, transport } = await alternatingClient(t.gateways, ownerKey);
    await getMe(client).catch(() => undefined);
    const ownerSession = transport.sessionId!;
    await client.close();

    expect((await owner.call('POST', `/api/agents/${agentId}/sessions/not-a-session/reset`)).status).toBe(400);
    expect((await owner.call('GET', `/api/agents/${agentId}/sessions?limit=abc`)).status).toBe(400);
    expect((await owner.call('GET', `/api/agents/${agentId}/sessions?status=zombie`)).status).toBe(400);
    expect((await owner.call('POST', `/api/agents/${agentId}/sessions/${crypto.randomUUID()}/reset`)).status).toBe(404);
    // A member cannot see or reset the owner's session: the same 404 as a missing one.
    expect((await memberApi.call('POST', `/api/agents/${agentId}/sessions/${ownerSession}/reset`)).status).toBe(404);
    expect((await memberApi.call('GET', `/api/agents/${agentId}/sessions/${ownerSession}/activity`)).status).toBe(404);
    // Another agent's owner: 404 for the agent itself.
    const stranger = apiClient(t.gateways[0]!);
    await signInThroughOutbox(stranger, t.outboxDir, 'stranger@example.com');
    expect((await stranger.call('POST', `/api/agents/${agentId}/sessions/${ownerSession}/reset`)).status).toBe(404);
    expect((await stranger.call('GET', `/api/agents/${agentId}/my-sessions`)).status).toBe(404);

    const still = await owner.call('GET', `/api/agents/${agentId}/sessions?status=active`);
    expect(still.body.sessions.some((s: { id: string }) => s.id === ownerSession)).toBe(true);
  });

  it('issue 15 item 15: rotating or revoking a key, or removing the member, ends their sessions at once, on every replica', async () => {
    const ended = new Set<string>();
    const unsubscribe = t.bus.onChange((e) => { if (e.kind === 'session.ended') ended.add(e.sessionId); });
    const listed = async (id: string) => {
      const all = await owner.call('GET', `/api/agents/${agentId}/sessions?limit=100`);
      const active = await owner.call('GET', `/api/agents/${agentId}/sessions?status=active&limit=100`);
      return { session: all.body.sessions.find((s: { id: string }) => s.id === id), active: active.body.sessions.some((s: { id: string }) => s.id === id) };
    };
    const listTools = async (gateway: string, key: string, sessionId: string) => {
      const res = await fetch(`${gateway}/mcp`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-06-18' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
      });
      await res.body?.cancel();
      return res.status;
    };
    const openSession = async (key: string) => {
      const opened = await alternatingClient(t.gateways, key);
      expect((await getMe(opened.client)).isError).toBeFalsy();
      return opened;
    };

    // The member rotates their own key: the old key's session ends; presented with the new key it is 404 everywhere.
    const first = await openSession(member.memberKey);
    const rotatedId = first.transport.sessionId!;
    const rotated = await memberApi.call('PUT', `/api/agents/${agentId}/members/${member.memberId}/key`, { currentKey: member.memberKey });
    expect(rotated.status, rotated.text).toBe(200);
    const newKey: string = rotated.body.key;
    expect(await listed(rotatedId)).toMatchObject({ active: false, session: { status: 'terminated', endReason: 'key_rotated' } });
    for (const gateway of t.gateways) expect(await listTools(gateway, newKey, rotatedId)).toBe(404);

    // The owner revokes the key: its session ends; the key itself is refused everywhere.
    const second = await openSession(newKey);
    const revokedId = second.transport.sessionId!;
    expect((await owner.call('DELETE', `/api/agents/${agentId}/members/${member.memberId}/key`)).status).toBe(204);
    expect(await listed(revokedId)).toMatchObject({ active: false, session: { status: 'terminated', endReason: 'key_revoked' } });
    for (const gateway of t.gateways) expect(await listTools(gateway, newKey, revokedId)).toBe(401);

    // The owner removes a member with an open session: it no longer lists, and it is announced as ended.
    const token = await sandboxTokenIssuer(t.sandboxUrl)('github', { login: 'lee', name: 'Lee' });
    const leaving = await addMember(t.database.db, { agentId, email: 'leaving@example.com', status: 'approved', connect: { github: token } });
    const third = await openSession(leaving.memberKey);
    const removedId = third.transport.sessionId!;
    expect((await owner.call('DELETE', `/api/agents/${agentId}/members/${leaving.memberId}`)).status).toBe(204);
    expect((await listed(removedId)).active).toBe(false);
    for (const gateway of t.gateways) expect(await listTools(gateway, leaving.memberKey, removedId)).toBe(401);
    // The owner keeps seeing it, as its audit entries keep naming it (issue 30): ended, whose, and its activity.
    expect((await listed(removedId)).session).toMatchObject({
      status: 'terminated', endReason: 'member_removed', memberId: leaving.memberId, memberEmail: 'leaving@example.com',
    });
    const activityOf = () => owner.call('GET', `/api/agents/${agentId}/sessions/${removedId}/activity`);
    let activity = await activityOf();
    for (let i = 0; i < 50 && activity.body.calls !== 1; i++) {
      await new Promise((r) => setTimeout(r, 100));
      activity = await activityOf();
    }
    expect(activity.status, activity.text).toBe(200);
    expect(activity.body).toMatchObject({ calls: 1, session: { id: removedId, memberId: leaving.memberId, memberEmail: 'leaving@example.com', status: 'terminated' } });
    expect((await owner.call('GET', `/api/agents/${agentId}/sessions?memberId=${leaving.memberId}`)).body.sessions.map((s: { id: string }) => s.id)).toEqual([removedId]);

    // Every end was announced (so each session's counters are dropped by every decision point).
    for (let i = 0; i < 50 && ![rotatedId, revokedId, removedId].every((id) => ended.has(id)); i++) await new Promise((r) => setTimeout(r, 100));
    expect([...ended]).toEqual(expect.arrayContaining([rotatedId, revokedId, removedId]));
    unsubscribe();
    for (const opened of [first, second, third]) await opened.client.close();
  });
});
