import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { digestKey, displaySuffixOf, generateMemberKey, schema, type AuditEntry } from '@portcullis/core';
import type { AuditService } from '@portcullis/audit';
import { signInRoleActors, type Actor, type ApiHarness, type RoleActors } from '@portcullis/gateway/testing';
import { makeEntry } from '../../services/audit/src/testing/audit-entries.ts';
import { parseCsv } from '../../services/audit/src/testing/parse-csv.ts';
import { startAuditApiHarness, type AuditApiHarness } from '../support/audit-api-harness.ts';

/**
 * Issue 15, the audit read side, through the gateway's `/api` with a real audit service (chDB)
 * over gRPC and the harness's Postgres: every read path of a trusted agent's audit for its
 * owner and for a member who is not its owner (decision 022), audit access after an agent is
 * deleted (decision 023), `to` inclusive at the precision written and the `from` > `to` error
 * (decision 003). Entries are written straight into the store, for agents made through the API.
 */

const HEADER = ['timestamp', 'agent', 'member', 'tool', 'service', 'resource', 'decision', 'reason', 'duration', 'matched_policy_ids'];
/** Policy identities of the trusted agent: none may reach its non-owner member. */
const SECRET = { key: 'night-freeze', name: 'Night freeze', dbId: randomUUID(), versionId: randomUUID(), key2: 'repo-guard', name2: 'Repo guard', dbId2: randomUUID() };
/** A policy of the standard agent: the same member sees it whole. */
const OPEN = { key: 'no-deletes', name: 'No deletes', dbId: randomUUID(), versionId: randomUUID() };

let h: ApiHarness;
let roles: RoleActors;
let audit: AuditService;
let harness: AuditApiHarness;
let memberIdOf: AuditApiHarness['memberIdOf'];
const agent = { trusted: '', standard: '', doomed: '', timed: '' };
const memberOf: Record<string, Partial<Record<Actor, string>>> = {};
const e: Record<string, AuditEntry> = {};
let sessionId: string;

const get = (url: string, actor: Actor) => h.request({ method: 'GET', url, cookie: roles.cookieOf[actor]! });
async function ok<T = any>(url: string, actor: Actor): Promise<T> {
  const res = await get(url, actor);
  expect(res.statusCode, `${url} as ${actor}: ${res.body}`).toBe(200);
  return (String(res.headers['content-type']).startsWith('application/json') ? res.json() : res.body) as T;
}
const csvOf = (body: string) => {
  const [header, ...rows] = parseCsv(body);
  expect(header).toEqual(HEADER);
  return rows.map((r) => Object.fromEntries(HEADER.map((name, i) => [name, r[i]!])));
};
const ndjsonOf = (body: string) => body.split('\n').filter(Boolean).map((line) => JSON.parse(line) as AuditEntry);

beforeAll(async () => {
  harness = await startAuditApiHarness('audit-scope');
  ({ h, audit, memberIdOf } = harness);
  roles = await signInRoleActors(h, 'scope');
  agent.trusted = await roles.agentWithMembers({ name: 'Trusted Ops', type: 'trusted' });
  agent.standard = await roles.agentWithMembers({ name: 'Standard Desk' });
  agent.doomed = await roles.agentWithMembers({ name: 'Doomed Bot', type: 'trusted' });
  agent.timed = await roles.agentWithMembers({ name: 'Clockwork' });
  for (const id of Object.values(agent)) memberOf[id] = { owner: await memberIdOf(id, roles.email.owner), member: await memberIdOf(id, roles.email.member) };

  // The member's tool session on the trusted agent (as /mcp would have recorded it).
  const key = generateMemberKey();
  const [keyRow] = await h.db.insert(schema.memberKeys).values({ memberId: memberOf[agent.trusted]!.member!, keyHash: digestKey(key), displaySuffix: displaySuffixOf(key) }).returning();
  sessionId = randomUUID();
  await h.db.insert(schema.toolSessions).values({ id: sessionId, agentId: agent.trusted, memberId: memberOf[agent.trusted]!.member!, keyId: keyRow!.id });

  const on = (agentId: string, agentName: string, over: Partial<AuditEntry>) => makeEntry({
    agentId, agentName, memberId: memberOf[agentId]!.member!, memberName: roles.email.member, sessionId, ...over,
  });
  const trustedDeny = { decision: 'DENY' as const, matchedPolicyIds: [SECRET.key], matchedPolicyNames: [SECRET.name], policyDbIds: [SECRET.dbId], policyVersionIds: [SECRET.versionId] };
  Object.assign(e, {
    // What the decision point writes for a forbid without a deny message…
    generated: on(agent.trusted, 'Trusted Ops', { ...trustedDeny, timestamp: '2026-10-01T10:00:00.000Z', tool: 'delete_repository', reason: `Denied by policy "${SECRET.name}"` }),
    // …with one (the member's agent got this text as its tool result),
    ownMessage: on(agent.trusted, 'Trusted Ops', { ...trustedDeny, timestamp: '2026-10-01T10:01:00.000Z', tool: 'list_branches', reason: 'Ask the owner first' }),
    // a permit on a default-deny agent, whose call then failed upstream,
    permitted: on(agent.trusted, 'Trusted Ops', {
      timestamp: '2026-10-01T10:02:00.000Z', tool: 'get_me', decision: 'ALLOW', reason: `Allowed by policy "${SECRET.name2}"; upstream error: 503`,
      matchedPolicyIds: [SECRET.key2], matchedPolicyNames: [SECRET.name2], policyDbIds: [SECRET.dbId2], policyVersionIds: [randomUUID()],
    }),
    // and a policy Cedar could not evaluate.
    failed: on(agent.trusted, 'Trusted Ops', { ...trustedDeny, timestamp: '2026-10-01T10:03:00.000Z', tool: 'create_issue', reason: `Denied: policy "${SECRET.name}" could not be evaluated: in policy ${SECRET.key}: unknown attribute` }),
    standard: on(agent.standard, 'Standard Desk', {
      timestamp: '2026-10-01T11:00:00.000Z', decision: 'DENY', tool: 'delete_repository', reason: `Denied by policy "${OPEN.name}"`,
      matchedPolicyIds: [OPEN.key], matchedPolicyNames: [OPEN.name], policyDbIds: [OPEN.dbId], policyVersionIds: [OPEN.versionId], sessionId: randomUUID(),
    }),
    doomedByMember: on(agent.doomed, 'Doomed Bot', { ...trustedDeny, timestamp: '2026-10-02T09:00:00.000Z', reason: `Denied by policy "${SECRET.name}"` }),
    doomedByOwner: makeEntry({ agentId: agent.doomed, agentName: 'Doomed Bot', memberId: memberOf[agent.doomed]!.owner!, memberName: roles.email.owner, timestamp: '2026-10-02T09:30:00.000Z' }),
  });
  // Clockwork: 14 calls inside the minute 21:12 (its first and last millisecond included) and one just either side.
  const inMinute = ['00.000', '00.001', '04.999', '05.000', '05.300', '05.399', '05.400', '05.999', '06.000', '30.000', '59.000', '59.500', '59.998', '59.999'];
  const clock = [...inMinute.map((s) => `2026-10-03T21:12:${s}Z`), '2026-10-03T21:11:59.999Z', '2026-10-03T21:13:00.000Z'];
  const timed = clock.map((timestamp, i) => on(agent.timed, 'Clockwork', { timestamp, reason: `tick-${i}` }));
  await audit.store.insert([...Object.values(e), ...timed]);
});

afterAll(async () => { await harness?.close(); });

type ApiEntry = { id: string; reason: string; matchedPolicyIds: string[]; matchedPolicyNames: string[]; policyVersionIds: string[] };
const trustedIds = () => [e.generated!.id, e.ownMessage!.id, e.permitted!.id, e.failed!.id];
/** What the member reads for each trusted entry. */
const REDACTED_REASONS: Record<string, string> = {};
beforeAll(() => {
  Object.assign(REDACTED_REASONS, {
    [e.generated!.id]: 'Denied by policy',
    [e.ownMessage!.id]: 'Ask the owner first',
    [e.permitted!.id]: 'Allowed by policy; upstream error: 503',
    [e.failed!.id]: 'Denied: a policy could not be evaluated',
  });
});
const secretsIn = (text: string) => [SECRET.key, SECRET.name, SECRET.dbId, SECRET.versionId, SECRET.key2, SECRET.name2, SECRET.dbId2].filter((s) => text.includes(s));

describe('a trusted agent\'s policy identities, for a member who is not its owner (decision 022)', () => {
  it('GET /api/audit lists its entries without policy keys, names or versions, and reasons without policy names', async () => {
    const res = await get('/api/audit?agent=trusted', 'member');
    expect(res.statusCode, res.body).toBe(200);
    const { entries, total } = res.json() as { entries: ApiEntry[]; total: number };
    expect(total).toBe(4);
    for (const entry of entries) {
      expect(entry, entry.id).toMatchObject({ reason: REDACTED_REASONS[entry.id], matchedPolicyIds: [], matchedPolicyNames: [], policyVersionIds: [] });
    }
    expect(secretsIn(res.body)).toEqual([]);
    // The same member sees a standard agent's policies whole.
    const standard = (await ok<{ entries: ApiEntry[] }>('/api/audit?agent=standard', 'member')).entries;
    expect(standard).toMatchObject([{ reason: `Denied by policy "${OPEN.name}"`, matchedPolicyIds: [OPEN.key], matchedPolicyNames: [OPEN.name], policyVersionIds: [OPEN.versionId] }]);
  });

  it('the owner reads every identity', async () => {
    const { entries } = await ok<{ entries: ApiEntry[] }>('/api/audit?agent=trusted', 'owner');
    const generated = entries.find((x) => x.id === e.generated!.id)!;
    expect(generated).toMatchObject({ reason: `Denied by policy "${SECRET.name}"`, matchedPolicyIds: [SECRET.key], matchedPolicyNames: [SECRET.name], policyVersionIds: [SECRET.versionId] });
    expect(entries.find((x) => x.id === e.failed!.id)!.reason).toContain('could not be evaluated: in policy night-freeze');
  });

  it('the CSV export empties the policy column and drops policy names from the reason column', async () => {
    const body = await ok<string>('/api/audit/export?agent=trusted', 'member');
    const rows = csvOf(body);
    expect(rows.map((r) => r.reason).sort()).toEqual(Object.values(REDACTED_REASONS).sort());
    expect(rows.map((r) => r.matched_policy_ids)).toEqual(['', '', '', '']);
    expect(secretsIn(body)).toEqual([]);
    const owner = csvOf(await ok<string>('/api/audit/export?agent=trusted', 'owner'));
    expect(owner.find((r) => r.tool === 'delete_repository')).toMatchObject({ reason: `Denied by policy "${SECRET.name}"`, matched_policy_ids: SECRET.key });
  });

  it('the NDJSON export does the same, database ids included', async () => {
    const body = await ok<string>('/api/audit/export?agent=trusted&format=ndjson', 'member');
    const lines = ndjsonOf(body);
    expect(lines.map((x) => x.id).sort()).toEqual(trustedIds().sort());
    for (const line of lines) expect(line).toMatchObject({ reason: REDACTED_REASONS[line.id], matchedPolicyIds: [], matchedPolicyNames: [], policyDbIds: [], policyVersionIds: [] });
    expect(secretsIn(body)).toEqual([]);
    const owner = ndjsonOf(await ok<string>('/api/audit/export?agent=trusted&format=ndjson', 'owner'));
    expect(owner.find((x) => x.id === e.generated!.id)).toMatchObject({ policyDbIds: [SECRET.dbId], reason: `Denied by policy "${SECRET.name}"` });
  });

  it('the policy filter cannot probe which entries a hidden policy matched: it matches none of them (list, count, CSV, NDJSON)', async () => {
    for (const policy of [SECRET.dbId, SECRET.dbId2]) {
      expect(await ok(`/api/audit?policy=${policy}`, 'member')).toEqual({ entries: [], total: 0 });
      expect(csvOf(await ok<string>(`/api/audit/export?policy=${policy}`, 'member'))).toEqual([]);
      expect(await ok<string>(`/api/audit/export?format=ndjson&policy=${policy}`, 'member')).toBe('');
    }
    // The owner's filter works, and so does the member's on the standard agent's policy.
    expect((await ok<{ total: number }>(`/api/audit?policy=${SECRET.dbId}&agent=trusted`, 'owner')).total).toBe(3);
    expect((await ok<{ entries: Array<{ id: string }> }>(`/api/audit?policy=${OPEN.dbId}`, 'member')).entries.map((x) => x.id)).toEqual([e.standard!.id]);
  });

  it('session activity shows the member their calls without per-policy hits; the owner sees the hits', async () => {
    const url = `/api/agents/${agent.trusted}/sessions/${sessionId}/activity`;
    const member = await get(url, 'member');
    expect(member.statusCode, member.body).toBe(200);
    expect(member.json()).toMatchObject({ calls: 4, allowed: 1, denied: 3, policies: [] });
    expect(secretsIn(member.body)).toEqual([]);
    const owner = await ok<{ policies: Array<{ policyId: string; policyKey: string; policyName: string; hits: number }> }>(url, 'owner');
    expect(owner.policies).toEqual([
      { policyId: SECRET.dbId, policyKey: SECRET.key, policyName: SECRET.name, hits: 3 },
      { policyId: SECRET.dbId2, policyKey: SECRET.key2, policyName: SECRET.name2, hits: 1 },
    ].sort((a, b) => b.hits - a.hits || a.policyId.localeCompare(b.policyId)));
  });
});

describe('`to` is inclusive at the precision it was written in (decision 003)', () => {
  it.each<[string, string, number]>([
    ['a minute, from = to', 'from=2026-10-03T21:12Z&to=2026-10-03T21:12Z', 14],
    ['a minute with an offset', 'from=2026-10-03T23:12%2B02:00&to=2026-10-03T23:12%2B02:00', 14],
    ['a minute as to only (from the day)', 'from=2026-10-03&to=2026-10-03T21:12Z', 15],
    ['a second', 'from=2026-10-03T21:12:05Z&to=2026-10-03T21:12:05Z', 5],
    ['tenths of a second', 'from=2026-10-03T21:12:05.3Z&to=2026-10-03T21:12:05.3Z', 2],
    ['milliseconds', 'from=2026-10-03T21:12:05.399Z&to=2026-10-03T21:12:05.399Z', 1],
    ['a day', 'from=2026-10-03&to=2026-10-03', 16],
  ])('%s: %s', async (_label, range, expected) => {
    const list = await ok<{ total: number }>(`/api/audit?agent=clockwork&${range}`, 'owner');
    expect(list.total).toBe(expected);
    expect(csvOf(await ok<string>(`/api/audit/export?agent=clockwork&${range}`, 'owner'))).toHaveLength(expected);
    // The dashboard counts the same range (over every visible agent: only Clockwork has calls on that day).
    expect((await ok<{ calls: number }>(`/api/dashboard/stats?${range}`, 'owner')).calls).toBe(expected);
  });
});

describe('`from` after `to` (issue 15)', () => {
  it.each(['/api/audit', '/api/audit/export', '/api/audit/export?format=ndjson', '/api/dashboard/stats', '/api/dashboard/member-stats'])('GET %s: 400 naming `from`, the parameter the caller sent', async (route) => {
    const res = await get(`${route}${route.includes('?') ? '&' : '?'}from=2026-10-03T21:13Z&to=2026-10-03T21:12Z`, 'owner');
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toMatchObject({ error: { code: 'invalid_request', message: 'Invalid querystring field "from": must not be after "to"', details: { field: 'from' } } });
    expect(res.body).not.toContain('filter.');
  });
});

describe('a deleted agent\'s audit (decision 023)', () => {
  it('stays readable and exportable by its former owner, whole; its other members lose it', async () => {
    const before = await ok<{ total: number }>('/api/audit?agent=doomed', 'member');
    expect(before.total).toBe(2);
    const ownerStatsBefore = await ok<{ calls: number; agents: number }>('/api/dashboard/stats', 'owner');
    const deleted = await h.request({ method: 'DELETE', url: `/api/agents/${agent.doomed}`, cookie: roles.cookieOf.owner! });
    expect(deleted.statusCode, deleted.body).toBe(204);
    expect((await get(`/api/agents/${agent.doomed}`, 'owner')).statusCode).toBe(404);

    // The former owner: list, CSV, NDJSON, member list, counters — with every policy identity.
    const listed = await ok<{ entries: ApiEntry[]; total: number }>('/api/audit?agent=doomed', 'owner');
    expect(listed.entries.map((x) => x.id)).toEqual([e.doomedByOwner!.id, e.doomedByMember!.id]);
    expect(listed.entries[1]).toMatchObject({ reason: `Denied by policy "${SECRET.name}"`, matchedPolicyIds: [SECRET.key] });
    expect(csvOf(await ok<string>('/api/audit/export?agent=doomed', 'owner')).map((r) => r.agent)).toEqual(['Doomed Bot', 'Doomed Bot']);
    expect(ndjsonOf(await ok<string>('/api/audit/export?agent=doomed&format=ndjson', 'owner')).map((x) => x.id).sort()).toEqual([e.doomedByMember!.id, e.doomedByOwner!.id].sort());
    expect((await ok<{ total: number }>(`/api/audit?policy=${SECRET.dbId}&agent=doomed`, 'owner')).total).toBe(1);
    const members = (await ok<{ members: Array<{ memberId: string }> }>('/api/audit/members', 'owner')).members.map((m) => m.memberId);
    expect(members).toEqual(expect.arrayContaining([memberOf[agent.doomed]!.owner, memberOf[agent.doomed]!.member]));
    const stats = await ok<{ calls: number; agents: number }>('/api/dashboard/stats', 'owner');
    expect(stats).toMatchObject({ calls: ownerStatsBefore.calls, agents: ownerStatsBefore.agents - 1 });
    expect((await ok<{ members: unknown[] }>(`/api/dashboard/member-stats?agentId=${agent.doomed}`, 'owner')).members).toHaveLength(2);

    // Its other members: nothing, as for any agent they no longer belong to.
    expect(await ok('/api/audit?agent=doomed', 'member')).toEqual({ entries: [], total: 0 });
    expect(csvOf(await ok<string>('/api/audit/export?agent=doomed', 'member'))).toEqual([]);
    expect((await get(`/api/dashboard/member-stats?agentId=${agent.doomed}`, 'member')).statusCode).toBe(404);
    for (const actor of ['outsider', 'pending', 'rejected'] as const) expect(await ok('/api/audit?agent=doomed', actor)).toEqual({ entries: [], total: 0 });
  });
});
