import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSseStream, type SseEvent, type SseStream } from '@portcullis/gateway/testing';
import { apiClient, signInThroughOutbox, type ApiClient } from '../support/api-client.ts';
import { addMember, sandboxTokenIssuer } from '../support/fixtures.ts';
import { connectMcp } from '../support/mcp-client.ts';
import { startSplitTopology, type SplitTopology } from '../support/split-topology.ts';

/**
 * Issue 15 items 2 and 12, end to end: a real trusted agent (split processes: sandbox, PDP,
 * audit writer on chDB, gateway, on NATS JetStream and Postgres), its owner's policies compiled
 * and evaluated by Cedar, a member's real tool calls through `/mcp` with the official MCP SDK.
 * Then every audit read path as that member (not an owner) carries no policy identity, while
 * the owner reads them all (decision 022); and after the owner deletes the agent, the owner
 * still reads and exports its entries and the member does not (decision 023).
 */
const OWNER = 'redaction-owner@example.com';
const MEMBER = 'redaction-member@example.com';
const GUARD = { name: 'Secret branch guard', policyKey: 'secret-branch-guard' };
const ASK = { name: 'Ask before identity lookups', policyKey: 'ask-first', denyMessage: 'Ask the owner first' };

type ApiEntry = { id: string; tool: string; decision: string; reason: string; sessionId?: string; matchedPolicyIds: string[]; matchedPolicyNames: string[]; policyVersionIds: string[] };

describe('a trusted agent\'s audit, read by a member who is not its owner (split processes)', () => {
  let t: SplitTopology;
  let owner: ApiClient;
  let member: ApiClient;
  let agentId: string;
  let sessionId: string;
  /** Every policy identity the member must never read: keys, names, database ids, versions. */
  const secrets: string[] = [];
  const streams: SseStream[] = [];
  let memberStream: SseStream;
  let ownerStream: SseStream;
  let memberEntries: ApiEntry[] = [];

  const entryEvents = (s: SseStream) => s.events.filter((e: SseEvent) => e.event === 'entry').map((e) => JSON.parse(e.data) as ApiEntry);
  const leaked = (text: string) => secrets.filter((s) => text.includes(s));

  beforeAll(async () => {
    t = await startSplitTopology();
    const gateway = t.gateways[0]!;
    owner = apiClient(gateway);
    await signInThroughOutbox(owner, t.outboxDir, OWNER);
    agentId = (await owner.call('POST', '/api/agents', { name: 'Vault keeper', type: 'trusted' })).body.id;
    expect((await owner.call('PUT', `/api/agents/${agentId}/services`, { services: ['github'] })).status).toBe(200);
    for (const policy of [{ ...GUARD, tools: ['list_branches'] }, { ...ASK, tools: ['get_me'] }]) {
      const created = await owner.call('POST', `/api/agents/${agentId}/policies`, { ...policy, service: 'github', effect: 'forbid', principal: { type: 'all_members' } });
      expect(created.status, created.text).toBe(201);
      secrets.push(created.body.id, created.body.policyKey, created.body.name);
    }
    const issue = sandboxTokenIssuer(t.sandboxUrl);
    const added = await addMember(t.database.db, { agentId, email: MEMBER, status: 'approved', connect: { github: await issue('github', { login: 'mia', name: 'Mia' }) } });
    member = apiClient(gateway);
    await signInThroughOutbox(member, t.outboxDir, MEMBER);
    memberStream = await openSseStream(`${gateway}/api/audit/stream`, { headers: { cookie: member.cookie } });
    ownerStream = await openSseStream(`${gateway}/api/audit/stream`, { headers: { cookie: owner.cookie } });
    streams.push(memberStream, ownerStream);
    expect([memberStream.status, ownerStream.status]).toEqual([200, 200]);

    const { client, transport } = await connectMcp(gateway, added.memberKey);
    try {
      expect((await client.callTool({ name: 'github__search_repositories', arguments: { query: 'api' } })).isError).toBeFalsy();
      // The member's agent reads the verdict without the policy's name too; an owner's deny message is kept (below).
      const guarded = await client.callTool({ name: 'github__list_branches', arguments: { owner: 'acme', repo: 'api' } }) as { isError?: boolean; content: Array<{ text: string }> };
      expect(guarded).toMatchObject({ isError: true, content: [{ text: 'Denied by policy' }] });
      const asked = await client.callTool({ name: 'github__get_me', arguments: {} }) as { isError?: boolean; content: Array<{ text: string }> };
      expect(asked).toMatchObject({ isError: true, content: [{ text: ASK.denyMessage }] });
      sessionId = transport.sessionId!;
    } finally {
      await client.close();
    }
    // Versions of the matched policies, as the owner reads them once the entries are stored.
    let ownerEntries: ApiEntry[] = [];
    for (let i = 0; i < 100 && ownerEntries.length < 3; i++) {
      ownerEntries = ((await owner.call('GET', '/api/audit')).body.entries as ApiEntry[]).filter((e) => e.sessionId === sessionId && !/outcome not recorded/.test(e.reason));
      if (ownerEntries.length < 3) await new Promise((r) => setTimeout(r, 100));
    }
    expect(ownerEntries).toHaveLength(3);
    secrets.push(...ownerEntries.flatMap((e) => e.policyVersionIds));
    memberEntries = (await member.call('GET', '/api/audit')).body.entries as ApiEntry[];
    for (const s of [memberStream, ownerStream]) await s.waitFor((e) => e.event === 'entry' && JSON.parse(e.data).tool === 'get_me', 5_000);
  });
  afterAll(async () => {
    for (const s of streams) s.close();
    await t?.stop();
  });

  it('the owner reads the policy identities and the PDP\'s reason, which names the policy', async () => {
    const listed = (await owner.call('GET', `/api/audit?agent=vault`)).body.entries as ApiEntry[];
    expect(listed.find((e) => e.tool === 'list_branches')).toMatchObject({
      decision: 'DENY', reason: `Denied by policy "${GUARD.name}"`, matchedPolicyIds: [GUARD.policyKey], matchedPolicyNames: [GUARD.name],
    });
    expect(listed.find((e) => e.tool === 'get_me')).toMatchObject({ reason: ASK.denyMessage, matchedPolicyIds: [ASK.policyKey] });
    expect(secrets.length).toBe(8);
  });

  it('GET /api/audit: no keys, names, versions; the generated reason without the name, the owner\'s deny message kept', async () => {
    expect(memberEntries.map((e) => [e.tool, e.decision, e.reason, e.matchedPolicyIds, e.matchedPolicyNames, e.policyVersionIds]).sort()).toEqual([
      ['get_me', 'DENY', ASK.denyMessage, [], [], []],
      ['list_branches', 'DENY', 'Denied by policy', [], [], []],
      ['search_repositories', 'ALLOW', 'No forbid policy matched', [], [], []],
    ]);
    expect(leaked(JSON.stringify(memberEntries))).toEqual([]);
  });

  it('the CSV and NDJSON exports carry none either', async () => {
    for (const format of ['csv', 'ndjson']) {
      const res = await member.call('GET', `/api/audit/export?format=${format}`);
      expect(res.status, res.text).toBe(200);
      expect(res.text).toContain('Denied by policy');
      expect(leaked(res.text), format).toEqual([]);
    }
  });

  it('the policy filter finds nothing for the member, what it matched for the owner', async () => {
    const guardId = secrets[0]!;
    expect((await member.call('GET', `/api/audit?policy=${guardId}`)).body).toEqual({ entries: [], total: 0 });
    expect((await member.call('GET', `/api/audit/export?format=ndjson&policy=${guardId}`)).text).toBe('');
    expect(((await owner.call('GET', `/api/audit?policy=${guardId}`)).body.entries as ApiEntry[]).map((e) => e.tool)).toEqual(['list_branches']);
  });

  it('the live stream shows the member what GET /api/audit shows them; the owner\'s stream keeps the identities', async () => {
    const streamed = entryEvents(memberStream);
    expect(streamed).toHaveLength(3);
    for (const s of streamed) expect(s).toEqual(memberEntries.find((e) => e.id === s.id));
    expect(leaked(memberStream.events.map((e) => e.data).join('\n'))).toEqual([]);
    expect(entryEvents(ownerStream).find((e) => e.tool === 'list_branches')).toMatchObject({ matchedPolicyNames: [GUARD.name] });
  });

  it('session activity shows the member their calls without per-policy hits', async () => {
    const mine = await member.call('GET', `/api/agents/${agentId}/sessions/${sessionId}/activity`);
    expect(mine.status, mine.text).toBe(200);
    expect(mine.body).toMatchObject({ calls: 3, allowed: 1, denied: 2, policies: [] });
    expect(leaked(mine.text)).toEqual([]);
    const owners = await owner.call('GET', `/api/agents/${agentId}/sessions/${sessionId}/activity`);
    expect(owners.body.policies.map((p: { policyName: string }) => p.policyName).sort()).toEqual([ASK.name, GUARD.name].sort());
  });

  it('after the owner deletes the agent, the owner still reads and exports its entries; the member does not', async () => {
    expect((await owner.call('DELETE', `/api/agents/${agentId}`)).status).toBe(204);
    const listed = (await owner.call('GET', '/api/audit?agent=vault')).body as { entries: ApiEntry[]; total: number };
    expect(listed.entries.map((e) => e.tool).sort()).toEqual(['get_me', 'list_branches', 'search_repositories']);
    expect(listed.entries.find((e) => e.tool === 'list_branches')!.matchedPolicyNames).toEqual([GUARD.name]);
    const csv = await owner.call('GET', '/api/audit/export?agent=vault');
    expect(csv.status).toBe(200);
    expect(csv.text).toContain(GUARD.policyKey);
    expect((await member.call('GET', '/api/audit?agent=vault')).body).toEqual({ entries: [], total: 0 });
  });
});
