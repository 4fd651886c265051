import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import { schema, type AuditEntry } from '@portcullis/core';
import type { AuditService } from '@portcullis/audit';
import { ACTORS, signInRoleActors, type Actor, type ApiHarness, type RoleActors } from '@portcullis/gateway/testing';
import { createAuditClient, type AuditClient } from '../../services/gateway/src/clients/audit-client.ts';
import { exportBody } from '../../services/gateway/src/clients/export-body.ts';
import { makeEntry } from '../../services/audit/src/testing/audit-entries.ts';
import { parseCsv } from '../../services/audit/src/testing/parse-csv.ts';
import { startAuditApiHarness, type AuditApiHarness } from '../support/audit-api-harness.ts';

/**
 * GET /api/audit/export, /api/audit/members, /api/dashboard/stats and /api/dashboard/member-stats
 * (decision 014) through the gateway's `/api` with a real audit service (chDB) over gRPC on
 * loopback, sharing the harness's Postgres database. Entries are written straight into the
 * store, for agents created through the API.
 */

const HEADER = ['timestamp', 'agent', 'member', 'tool', 'service', 'resource', 'decision', 'reason', 'duration', 'matched_policy_ids'];
const CALLER_IP = '203.0.113.77';
const P1 = '0195f0a0-0000-7000-8000-0000000000f1';
const P9 = '0195f0a0-0000-7000-8000-0000000000f9';
const BULK_ROWS = 1_201;

let h: ApiHarness;
let roles: RoleActors;
let audit: AuditService;
let harness: AuditApiHarness;
let memberIdOf: AuditApiHarness['memberIdOf'];
/** Agents: standard Support Desk, trusted Trusted Ops, Bulk (owner + the usual members); the outsider's own agent. */
const agent = { support: '', trusted: '', bulk: '', outsiders: '' };
/** Member ids per agent and actor. */
const memberOf: Record<string, Partial<Record<Actor, string>>> = {};
const seeded: Record<string, AuditEntry> = {};

beforeAll(async () => {
  harness = await startAuditApiHarness('audit-api');
  ({ h, audit, memberIdOf } = harness);
  roles = await signInRoleActors(h, 'auditapi');
  agent.support = await roles.agentWithMembers({ name: 'Support Desk' });
  agent.trusted = await roles.agentWithMembers({ name: 'Trusted Ops', type: 'trusted' });
  agent.bulk = await roles.agentWithMembers({ name: 'Bulk Loader' });
  const own = await h.request({ method: 'POST', url: '/api/agents', payload: { name: 'Outsider Own' }, cookie: roles.cookieOf.outsider! });
  agent.outsiders = (own.json() as { id: string }).id;
  for (const id of [agent.support, agent.trusted, agent.bulk]) {
    memberOf[id] = { owner: await memberIdOf(id, roles.email.owner), member: await memberIdOf(id, roles.email.member) };
  }
  memberOf[agent.outsiders] = { outsider: await memberIdOf(agent.outsiders, roles.email.outsider) };

  const entry = (agentId: string, agentName: string, actor: Actor, over: Partial<AuditEntry>) => makeEntry({
    agentId, agentName, memberId: memberOf[agentId]![actor]!, memberName: roles.email[actor as Exclude<Actor, 'anonymous'>], callerIp: CALLER_IP, ...over,
  });
  Object.assign(seeded, {
    s1: entry(agent.support, 'Support Desk', 'member', { timestamp: '2026-10-01T10:00:00.000Z', service: 'github', tool: 'create_issue', decision: 'ALLOW', reason: 's1' }),
    s2: entry(agent.support, 'Support Desk', 'owner', {
      timestamp: '2026-10-01T11:00:00.000Z', service: 'github', tool: 'delete_repository', decision: 'DENY', reason: 's2: no, "really", not now',
      matchedPolicyIds: ['no-deletes', 'repo-guard'], matchedPolicyNames: ['No deletes', 'Repo guard'], policyDbIds: [P1], policyVersionIds: ['ver-s2'],
    }),
    s3: entry(agent.support, 'Support Desk', 'member', { timestamp: '2026-10-02T09:00:00.000Z', service: 'slack', tool: 'post_message', decision: 'DENY', reason: 's3' }),
    t1: entry(agent.trusted, 'Trusted Ops', 'member', {
      timestamp: '2026-10-01T12:00:00.000Z', service: 'github', tool: 'delete_repository', decision: 'DENY', reason: 't1',
      matchedPolicyIds: ['trusted-secret-key'], matchedPolicyNames: ['Trusted secret name'], policyDbIds: [P9], policyVersionIds: ['ver-trusted-9'],
    }),
    t2: entry(agent.trusted, 'Trusted Ops', 'owner', { timestamp: '2026-10-02T12:00:00.000Z', service: 'linear', tool: 'create_issue', decision: 'ALLOW', reason: 't2' }),
    o1: entry(agent.outsiders, 'Outsider Own', 'outsider', { timestamp: '2026-10-01T09:00:00.000Z', service: 'github', tool: 'create_issue', decision: 'ALLOW', reason: 'o1' }),
  });
  const bulk = Array.from({ length: BULK_ROWS }, (_, i) => entry(agent.bulk, 'Bulk Loader', i % 2 ? 'member' : 'owner', {
    timestamp: new Date(Date.UTC(2026, 8, 1) + i * 1_000).toISOString(), service: 'linear', tool: 'list_issues', decision: 'ALLOW', reason: `bulk-${i}`,
  }));
  await audit.store.insert(Object.values(seeded));
  await audit.store.insert(bulk);

  // Two policies (one disabled) on Support Desk, one on the outsider's agent.
  const policy = (agentId: string, policyKey: string, enabled: boolean) =>
    ({ agentId, policyKey, name: policyKey, service: 'github', effect: 'forbid' as const, principal: { type: 'all_members' as const }, enabled });
  await h.db.insert(schema.policies).values([policy(agent.support, 'on', true), policy(agent.support, 'off', false), policy(agent.outsiders, 'theirs', true)]);
});

afterAll(async () => { await harness?.close(); });

const get = (url: string, actor: Actor = 'owner') => h.request({ method: 'GET', url, ...(roles.cookieOf[actor] ? { cookie: roles.cookieOf[actor] } : {}) });

/** Export CSV as `actor`; returns the records after the header (and checks the header). */
async function csvRows(query: string, actor: Actor = 'owner'): Promise<string[][]> {
  const res = await get(`/api/audit/export?${query}`, actor);
  expect(res.statusCode, res.body).toBe(200);
  const [header, ...rows] = parseCsv(res.body);
  expect(header).toEqual(HEADER);
  return rows;
}
const col = (rows: string[][], name: string) => rows.map((r) => r[HEADER.indexOf(name)]!);

async function ndjson(query: string, actor: Actor = 'owner'): Promise<AuditEntry[]> {
  const res = await get(`/api/audit/export?format=ndjson&${query}`, actor);
  expect(res.statusCode, res.body).toBe(200);
  return res.body.split('\n').filter(Boolean).map((line) => JSON.parse(line) as AuditEntry);
}

describe('the agent filter after a rename (decision 035)', () => {
  it('finds a renamed agent\'s entries by its current name and by the name they were recorded with', async () => {
    const owner = roles.cookieOf.owner!;
    const renamed = await h.request({ method: 'PUT', url: `/api/agents/${agent.trusted}`, payload: { name: 'Night Shift' }, cookie: owner });
    expect(renamed.statusCode, renamed.body).toBe(200);
    try {
      for (const needle of ['night', 'TRUSTED']) {
        const listed = await get(`/api/audit?agent=${needle}`);
        expect(listed.statusCode, listed.body).toBe(200);
        expect((listed.json() as { entries: Array<{ reason: string }> }).entries.map((e) => e.reason).sort()).toEqual(['t1', 't2']);
      }
      // Another user's agent's current name opens nothing.
      expect(((await get('/api/audit?agent=outsider')).json() as { total: number }).total).toBe(0);
    } finally {
      await h.request({ method: 'PUT', url: `/api/agents/${agent.trusted}`, payload: { name: 'Trusted Ops' }, cookie: owner });
    }
  });
});

describe('GET /api/audit answers every field of the spec (its response schema, decision 045)', () => {
  it('a full entry keeps every field as recorded: the spec\'s table, `user`, `sessionId`, `policyVersionIds` and `policyDbIds`', async () => {
    const res = await get(`/api/audit?agentId=${agent.support}&result=DENY&tool=delete`);
    expect(res.statusCode, res.body).toBe(200);
    const s2 = seeded.s2!;
    expect(res.json()).toEqual({
      total: 1,
      entries: [{
        id: s2.id, timestamp: '2026-10-01T11:00:00.000Z', agentId: agent.support, agentName: 'Support Desk',
        memberId: memberOf[agent.support]!.owner, memberName: roles.email.owner, user: roles.email.owner, memberKeyId: s2.memberKeyId,
        sessionId: 'session-1', service: 'github', tool: 'delete_repository', action: s2.action, resource: s2.resource, callerIp: CALLER_IP,
        toolArgs: { title: 'Bug', body: 'It broke' }, decision: 'DENY', reason: 's2: no, "really", not now',
        matchedPolicyIds: ['no-deletes', 'repo-guard'], matchedPolicyNames: ['No deletes', 'Repo guard'], policyVersionIds: ['ver-s2'], policyDbIds: [P1],
        durationMs: 12.5, principal: s2.principal,
      }],
    });
  });
});

describe('the exact agentId filter (decision 045)', () => {
  const reasons = async (url: string, actor: Actor = 'owner') => {
    const res = await get(url, actor);
    expect(res.statusCode, res.body).toBe(200);
    return ((res.json() as { entries: Array<{ reason: string }> }).entries.map((e) => e.reason)).sort();
  };
  const histogramTotal = async (url: string, actor: Actor = 'owner') =>
    ((await get(url, actor)).json() as { buckets: Array<{ calls: number }> }).buckets.reduce((n, b) => n + b.calls, 0);

  it('lists, counts and exports one agent\'s entries, for its owner and an approved member', async () => {
    for (const actor of ['owner', 'member'] as const) {
      expect(await reasons(`/api/audit?agentId=${agent.support}&from=2026-09-30`, actor)).toEqual(['s1', 's2: no, "really", not now', 's3']);
      expect(await histogramTotal(`/api/audit/histogram?agentId=${agent.support}&from=2026-09-30`, actor)).toBe(3);
      expect(col(await csvRows(`agentId=${agent.support}&from=2026-09-30`, actor), 'agent')).toEqual(['Support Desk', 'Support Desk', 'Support Desk']);
    }
    expect(await reasons(`/api/audit?agentId=${agent.trusted}`)).toEqual(['t1', 't2']);
    // With the name substring too, both must hold.
    expect(await reasons(`/api/audit?agentId=${agent.support}&agent=trusted`)).toEqual([]);
    expect(await reasons(`/api/audit?agentId=${agent.support}&agent=DESK&result=ALLOW&from=2026-09-30`)).toEqual(['s1']);
  });

  it('an agent the caller cannot see, or none at all, matches nothing: 200 and empty, as for an unknown member or policy id', async () => {
    for (const [actor, id] of [['outsider', agent.support], ['pending', agent.support], ['rejected', agent.support], ['owner', agent.outsiders], ['owner', randomUUID()]] as const) {
      expect(await reasons(`/api/audit?agentId=${id}`, actor), `${actor}`).toEqual([]);
      expect(((await get(`/api/audit?agentId=${id}`, actor)).json() as { total: number }).total).toBe(0);
      expect(await histogramTotal(`/api/audit/histogram?agentId=${id}`, actor)).toBe(0);
      expect(await csvRows(`agentId=${id}`, actor)).toEqual([]);
    }
  });

  it('carries each matched policy\'s database id, which is the `policy` filter; redacted as the rest for a member of a trusted agent (issue 30)', async () => {
    const idsOf = async (url: string, actor: Actor) => ((await get(url, actor)).json().entries as Array<{ policyDbIds: string[] }>).map((e) => e.policyDbIds);
    expect(await idsOf(`/api/audit?agentId=${agent.trusted}&result=DENY`, 'owner')).toEqual([[P9]]);
    expect(await idsOf(`/api/audit?agentId=${agent.trusted}&result=DENY`, 'member')).toEqual([[]]);
    // A standard agent's members see them, and can filter by them.
    const [[id]] = await idsOf(`/api/audit?agentId=${agent.support}&result=DENY&tool=delete`, 'member') as [[string]];
    expect(await reasons(`/api/audit?policy=${id}`, 'member')).toEqual(['s2: no, "really", not now']);
  });

  it('keeps the redaction: a member of a trusted agent finds no entry by a hidden policy there', async () => {
    expect(await reasons(`/api/audit?agentId=${agent.trusted}&policy=${P9}`, 'owner')).toEqual(['t1']);
    expect(await reasons(`/api/audit?agentId=${agent.trusted}&policy=${P9}`, 'member')).toEqual([]);
    const [t1] = (await get(`/api/audit?agentId=${agent.trusted}&result=DENY`, 'member')).json().entries as Array<{ matchedPolicyIds: string[] }>;
    expect(t1!.matchedPolicyIds).toEqual([]);
  });
});

describe('GET /api/audit/export as CSV', () => {
  it('is an attachment with the spec columns (exact header, no callerIp), RFC 4180 quoting, names for agent and member', async () => {
    const res = await get('/api/audit/export?agent=support');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['content-type']).toBe('text/csv; charset=utf-8');
    expect(res.headers['content-disposition']).toMatch(/^attachment; filename="portcullis-audit-\d{8}-\d{6}\.csv"$/);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.body.startsWith('timestamp,agent,member,tool,service,resource,decision,reason,duration,matched_policy_ids\r\n')).toBe(true);
    expect(res.body).not.toContain(CALLER_IP);
    expect(res.body.toLowerCase()).not.toContain('callerip');
    expect(res.body.toLowerCase()).not.toContain('caller_ip');
    const rows = parseCsv(res.body).slice(1);
    // The list's order: newest first (issue 30, decision 071).
    expect(col(rows, 'reason')).toEqual(['s3', 's2: no, "really", not now', 's1']);
    expect(rows[1]).toEqual([
      '2026-10-01T11:00:00.000Z', 'Support Desk', roles.email.owner, 'delete_repository', 'github', seeded.s2!.resource, 'DENY', 's2: no, "really", not now', String(seeded.s2!.durationMs), 'no-deletes;repo-guard',
    ]);
    expect(col(rows, 'member')).toEqual([roles.email.member, roles.email.owner, roles.email.member]);
    // `max=1` is the newest entry, as the list's first.
    const newest = (await get('/api/audit?limit=1')).json().entries[0] as { timestamp: string; reason: string };
    expect((await csvRows('max=1')).map((r) => [r[0], r[HEADER.indexOf('reason')]])).toEqual([[newest.timestamp, newest.reason]]);
  });

  it.each<[string, string, string[]]>([
    ['no filter: every visible agent\'s rows, none of the outsider\'s', '', ['s1', 's2', 's3', 't1', 't2']],
    ['result', 'result=DENY', ['s2', 's3', 't1']],
    ['service (exact)', 'service=slack', ['s3']],
    ['service is not a substring match', 'service=slac', []],
    ['tool (case-insensitive substring)', 'tool=DELETE', ['s2', 't1']],
    ['agent (case-insensitive substring)', 'agent=TRUSTED', ['t1', 't2']],
    ['from and to, inclusive; a bare date is the whole day', 'from=2026-10-01T11:00:00Z&to=2026-10-01', ['s2', 't1']],
    ['policy (database id)', `policy=${P1}`, ['s2']],
    ['policy given as a key matches nothing', 'policy=no-deletes', []],
    ['member given as an e-mail matches nothing', 'member=auditapi-member%40example.com', []],
    ['an injection string in agent matches nothing', `agent=${encodeURIComponent("' OR 1=1 --")}`, []],
    ['an injection string in service matches nothing', `service=${encodeURIComponent("github' OR '1'='1")}`, []],
    ['an injection string in member matches nothing', `member=${encodeURIComponent("x' OR 1=1; DROP TABLE audit_entries; --")}`, []],
    ['% and _ are literal in substring filters', 'tool=%25&agent=_', []],
  ])('passes the filters through: %s', async (_label, query, expected) => {
    // exportAll: a page of 500 could be all Bulk Loader's.
    const rows = await csvRows(query ? `${query}&exportAll=true` : 'exportAll=true');
    const reasons = col(rows, 'reason').filter((r) => !r.startsWith('bulk-')).map((r) => r.slice(0, 2));
    expect(reasons.sort()).toEqual([...expected].sort());
    // GET /api/audit applies the very same filters.
    const listed = await get(`/api/audit?${query}`);
    expect(listed.statusCode, listed.body).toBe(200);
    const ids = (listed.json() as { entries: Array<{ reason: string }> }).entries.map((e) => e.reason).filter((r) => !r.startsWith('bulk-')).map((r) => r.slice(0, 2));
    expect(ids.sort()).toEqual([...expected].sort());
  });

  it('filters by member id', async () => {
    const rows = await csvRows(`member=${memberOf[agent.support]!.member}`);
    expect(col(rows, 'reason')).toEqual(['s3', 's1']);
  });

  it('pages with max and offset (max defaults to 500) in the list\'s order, newest first; exportAll returns every row beyond 500', async () => {
    const bulkReasons = Array.from({ length: BULK_ROWS }, (_, i) => `bulk-${i}`).reverse();
    expect(col(await csvRows('agent=bulk'), 'reason')).toEqual(bulkReasons.slice(0, 500));
    expect(col(await csvRows('agent=bulk&max=500&offset=500'), 'reason')).toEqual(bulkReasons.slice(500, 1000));
    expect(col(await csvRows('agent=bulk&max=500&offset=1000'), 'reason')).toEqual(bulkReasons.slice(1000));
    expect(col(await csvRows('agent=bulk&max=3&offset=7'), 'reason')).toEqual(bulkReasons.slice(7, 10));
    expect(col(await csvRows('agent=bulk&offset=5000'), 'reason')).toEqual([]);
    expect(col(await csvRows('agent=bulk&exportAll=true'), 'reason')).toEqual(bulkReasons);
    expect(col(await csvRows('agent=bulk&exportAll=true&max=10'), 'reason')).toEqual(bulkReasons);
    expect(col(await csvRows('agent=bulk&exportAll=true&offset=1200'), 'reason')).toEqual([bulkReasons[1200]]);
    expect(col(await csvRows('agent=bulk&exportAll=false&max=2'), 'reason')).toEqual(bulkReasons.slice(0, 2));
    // A page of the export is the same page of the list.
    const listed = (await get('/api/audit?agent=bulk&limit=3&offset=7')).json().entries as Array<{ reason: string }>;
    expect(col(await csvRows('agent=bulk&max=3&offset=7'), 'reason')).toEqual(listed.map((e) => e.reason));
    // Everything visible, all agents together: 5 + 1201 rows.
    expect(await csvRows('exportAll=true')).toHaveLength(5 + BULK_ROWS);
  });

  it('redacts policy identities of a trusted agent for a member who is not its owner, not for the owner', async () => {
    const forMember = await get('/api/audit/export?exportAll=true&result=DENY', 'member');
    expect(forMember.statusCode).toBe(200);
    const memberRows = parseCsv(forMember.body).slice(1);
    const t1 = memberRows.find((r) => r[HEADER.indexOf('reason')] === 't1')!;
    expect(t1[HEADER.indexOf('agent')]).toBe('Trusted Ops');
    expect(t1[HEADER.indexOf('matched_policy_ids')]).toBe('');
    expect(forMember.body).not.toContain('trusted-secret-key');
    // A standard agent's policy ids stay in the same member's export.
    expect(memberRows.find((r) => r[HEADER.indexOf('reason')]!.startsWith('s2'))![HEADER.indexOf('matched_policy_ids')]).toBe('no-deletes;repo-guard');

    const forOwner = await csvRows('exportAll=true&result=DENY', 'owner');
    expect(forOwner.find((r) => r[HEADER.indexOf('reason')] === 't1')![HEADER.indexOf('matched_policy_ids')]).toBe('trusted-secret-key');

    // NDJSON alike: keys, names, database ids and versions are all emptied for the member.
    const memberLines = await ndjson('agent=trusted', 'member');
    expect(memberLines.find((e) => e.reason === 't1')).toMatchObject({ matchedPolicyIds: [], matchedPolicyNames: [], policyDbIds: [], policyVersionIds: [], decision: 'DENY' });
    const ownerLines = await ndjson('agent=trusted', 'owner');
    expect(ownerLines.find((e) => e.reason === 't1')).toMatchObject({
      matchedPolicyIds: ['trusted-secret-key'], matchedPolicyNames: ['Trusted secret name'], policyDbIds: [P9], policyVersionIds: ['ver-trusted-9'],
    });
    const raw = (await get('/api/audit/export?format=ndjson&agent=trusted', 'member')).body;
    for (const secret of ['trusted-secret-key', 'Trusted secret name', P9, 'ver-trusted-9']) expect(raw).not.toContain(secret);
  });
});

describe('GET /api/audit/export as NDJSON', () => {
  it('streams one whole entry per line in the API field names, with the NDJSON content type', async () => {
    const res = await get('/api/audit/export?format=ndjson&agent=support&max=2');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['content-type']).toBe('application/x-ndjson');
    expect(res.headers['content-disposition']).toMatch(/^attachment; filename="portcullis-audit-\d{8}-\d{6}\.ndjson"$/);
    const lines = res.body.split('\n').filter(Boolean).map((line) => JSON.parse(line) as AuditEntry);
    expect(lines.map((e) => e.id)).toEqual([seeded.s3!.id, seeded.s2!.id]);
    expect(lines[1]).toMatchObject({
      agentId: agent.support, agentName: 'Support Desk', memberId: memberOf[agent.support]!.owner, decision: 'DENY',
      matchedPolicyIds: ['no-deletes', 'repo-guard'], tool: 'delete_repository', timestamp: '2026-10-01T11:00:00.000Z',
    });
  });

  it('is an empty 200 when nothing matches (and CSV is the header alone)', async () => {
    const empty = await get('/api/audit/export?format=ndjson&tool=nothing-like-this');
    expect(empty.statusCode).toBe(200);
    expect(empty.body).toBe('');
    const header = await get('/api/audit/export?tool=nothing-like-this');
    expect(header.body).toBe(`${HEADER.join(',')}\r\n`);
  });
});

describe('export errors before the first byte are REST errors', () => {
  it.each<[string, string]>([
    ['an impossible date', 'to=2026-02-30'],
    ['from after to', 'from=2026-10-02&to=2026-10-01'],
    ['an hour that does not exist', 'from=2026-10-01T25:00:00Z'],
  ])('%s → 400 invalid_request', async (_label, query) => {
    for (const url of [`/api/audit/export?${query}`, `/api/audit/export?format=ndjson&${query}`, `/api/audit?${query}`, `/api/dashboard/stats?${query}`, `/api/dashboard/member-stats?${query}`]) {
      const res = await get(url);
      expect(res.statusCode, `${url}: ${res.body}`).toBe(400);
      expect(res.json()).toMatchObject({ error: { code: 'invalid_request' } });
      expect(res.headers['content-disposition']).toBeUndefined();
    }
  });
});

describe('GET /api/audit/members', () => {
  it('lists the member identities of the caller\'s visible audit data only', async () => {
    const res = await get('/api/audit/members');
    expect(res.statusCode, res.body).toBe(200);
    const { members } = res.json() as { members: Array<{ memberId: string; memberName: string }> };
    const expected = [agent.support, agent.trusted, agent.bulk].flatMap((id) => [
      { memberId: memberOf[id]!.owner!, memberName: roles.email.owner },
      { memberId: memberOf[id]!.member!, memberName: roles.email.member },
    ]);
    expect([...members].sort((a, b) => a.memberId.localeCompare(b.memberId))).toEqual(expected.sort((a, b) => a.memberId.localeCompare(b.memberId)));
    expect(res.body).not.toContain(roles.email.outsider);

    const theirs = (await get('/api/audit/members', 'outsider')).json() as { members: unknown[] };
    expect(theirs.members).toEqual([{ memberId: memberOf[agent.outsiders]!.outsider, memberName: roles.email.outsider }]);
  });
});

describe('GET /api/dashboard/stats', () => {
  it('counts calls, allowed and denied of the visible agents, the visible agents, and the policies of owned agents', async () => {
    const owner = await get('/api/dashboard/stats');
    expect(owner.statusCode, owner.body).toBe(200);
    expect(owner.json()).toEqual({ calls: 5 + BULK_ROWS, allowed: 2 + BULK_ROWS, denied: 3, agents: 3, policies: 2 });
    // The approved member sees the same calls and agents but owns no policies.
    expect((await get('/api/dashboard/stats', 'member')).json()).toEqual({ calls: 5 + BULK_ROWS, allowed: 2 + BULK_ROWS, denied: 3, agents: 3, policies: 0 });
    expect((await get('/api/dashboard/stats', 'outsider')).json()).toEqual({ calls: 1, allowed: 1, denied: 0, agents: 1, policies: 1 });
  });

  it('counts policies by one rule with the agent list: an agent\'s policies count for its owners only (issue 30, decision 071)', async () => {
    for (const actor of ['owner', 'member', 'outsider'] as const) {
      const { agents } = (await get('/api/agents?limit=100', actor)).json() as { agents: Array<{ id: string; policyCount: number; membership: { role: string } }> };
      const { policies } = (await get('/api/dashboard/stats', actor)).json() as { policies: number };
      expect(agents.reduce((n, a) => n + a.policyCount, 0), actor).toBe(policies);
      for (const a of agents.filter((x) => x.membership.role !== 'owner')) expect(a.policyCount, `${actor} on ${a.id}`).toBe(0);
    }
    // The owner sees Support Desk's two, as before.
    const { agents } = (await get('/api/agents?limit=100')).json() as { agents: Array<{ id: string; policyCount: number }> };
    expect(agents.find((a) => a.id === agent.support)!.policyCount).toBe(2);
  });

  it('applies from/to to the call counters only', async () => {
    const res = await get('/api/dashboard/stats?from=2026-10-01&to=2026-10-01');
    expect(res.json()).toEqual({ calls: 3, allowed: 1, denied: 2, agents: 3, policies: 2 });
  });
});

describe('GET /api/dashboard/member-stats', () => {
  it('breaks activity down per member over the visible agents, most calls first', async () => {
    const res = await get('/api/dashboard/member-stats?from=2026-10-01');
    expect(res.statusCode, res.body).toBe(200);
    const { members } = res.json() as { members: Array<Record<string, unknown>> };
    expect(members).toEqual(expect.arrayContaining([
      { memberId: memberOf[agent.support]!.member, memberName: roles.email.member, calls: 2, allowed: 1, denied: 1, lastCallAt: '2026-10-02T09:00:00.000Z' },
      { memberId: memberOf[agent.support]!.owner, memberName: roles.email.owner, calls: 1, allowed: 0, denied: 1, lastCallAt: '2026-10-01T11:00:00.000Z' },
      { memberId: memberOf[agent.trusted]!.member, memberName: roles.email.member, calls: 1, allowed: 0, denied: 1, lastCallAt: '2026-10-01T12:00:00.000Z' },
      { memberId: memberOf[agent.trusted]!.owner, memberName: roles.email.owner, calls: 1, allowed: 1, denied: 0, lastCallAt: '2026-10-02T12:00:00.000Z' },
    ]));
    expect(members).toHaveLength(4);
    expect(members[0]!.calls).toBe(2);
    expect(res.body).not.toContain(roles.email.outsider);
  });

  it('narrows to one visible agent with agentId, for the owner and an approved member', async () => {
    for (const actor of ['owner', 'member'] as const) {
      const res = await get(`/api/dashboard/member-stats?agentId=${agent.support}&to=2026-12-31`, actor);
      expect(res.statusCode, res.body).toBe(200);
      expect((res.json() as { members: Array<{ memberId: string; calls: number }> }).members.map((m) => [m.memberId, m.calls]))
        .toEqual([[memberOf[agent.support]!.member, 2], [memberOf[agent.support]!.owner, 1]]);
    }
    const bulk = (await get(`/api/dashboard/member-stats?agentId=${agent.bulk}`)).json() as { members: Array<{ calls: number }> };
    expect(bulk.members.map((m) => m.calls).reduce((a, b) => a + b, 0)).toBe(BULK_ROWS);
  });
});

describe('every route as every actor, with real audit data', () => {
  const ROUTES = ['/api/audit', '/api/audit/export?exportAll=true', '/api/audit/export?format=ndjson&exportAll=true', '/api/audit/members', '/api/dashboard/stats', '/api/dashboard/member-stats'];
  /** What each actor may see: anonymous nothing (401); outsider its own agent only; pending and rejected nothing; member and owner the three agents. */
  const sees: Record<Actor, { support: boolean; outsiders: boolean }> = {
    anonymous: { support: false, outsiders: false },
    outsider: { support: false, outsiders: true },
    rejected: { support: false, outsiders: false },
    pending: { support: false, outsiders: false },
    member: { support: true, outsiders: false },
    owner: { support: true, outsiders: false },
  };
  describe.each(ROUTES)('GET %s', (route) => {
    it.each(ACTORS)('as %s', async (actor) => {
      const res = await get(route, actor);
      if (actor === 'anonymous') {
        expect(res.statusCode).toBe(401);
        expect(res.json()).toMatchObject({ error: { code: 'unauthenticated' } });
        return;
      }
      expect(res.statusCode, res.body).toBe(200);
      const visible = sees[actor];
      const supportMarks = route.startsWith('/api/dashboard/stats')
        ? [] : route === '/api/audit/members' || route.startsWith('/api/dashboard/member-stats')
          ? [memberOf[agent.support]!.member!] : ['Support Desk', 'Trusted Ops'];
      for (const mark of supportMarks) expect(res.body.includes(mark), `${actor} sees ${mark}`).toBe(visible.support);
      const outsiderMark = route === '/api/audit/members' || route.startsWith('/api/dashboard/member-stats') ? memberOf[agent.outsiders]!.outsider! : 'Outsider Own';
      if (!route.startsWith('/api/dashboard/stats')) expect(res.body.includes(outsiderMark), `${actor} sees the outsider's data`).toBe(visible.outsiders);
      if (route.startsWith('/api/dashboard/stats')) {
        const calls = (JSON.parse(res.body) as { calls: number }).calls;
        expect(calls).toBe(visible.support ? 5 + BULK_ROWS : visible.outsiders ? 1 : 0);
      }
      // A member export never carries the caller IP column, whoever asks.
      if (route.includes('export') && !route.includes('ndjson')) expect(res.body).not.toContain(CALLER_IP);
    });
  });
});

describe('streaming', () => {
  let client: AuditClient;
  beforeAll(() => { client = createAuditClient(audit.address); });
  afterAll(() => client?.close());

  it('a consumer that goes away cancels the gRPC export (and the service keeps answering)', async () => {
    const call = client.export({
      filter: { agentIds: [agent.bulk], from: '', to: '', agent: '', service: '', tool: '', result: '', member: '', policy: '' },
      limit: 0, offset: 0, format: 'ndjson', redactPolicyAgentIds: [],
    });
    const status = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
    const body = await exportBody(call);
    const first = await new Promise<Buffer>((resolve) => body.once('data', resolve));
    expect(first.length).toBeGreaterThan(0);
    body.destroy();
    expect((await status).code).toBe(grpc.status.CANCELLED);
    const again = await csvRows('agent=bulk&max=1');
    expect(again).toHaveLength(1);
  });

  it('an export over HTTP that the client aborts leaves the gateway and the audit service working', async () => {
    const address = await h.app.listen({ port: 0, host: '127.0.0.1' });
    const controller = new AbortController();
    const res = await fetch(`${address}/api/audit/export?exportAll=true&format=ndjson`, { headers: { cookie: roles.cookieOf.owner! }, signal: controller.signal });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const { value } = await reader.read();
    expect(value!.length).toBeGreaterThan(0);
    controller.abort();
    await reader.closed.catch(() => undefined);
    const after = await fetch(`${address}/api/dashboard/stats`, { headers: { cookie: roles.cookieOf.owner! } });
    expect(after.status).toBe(200);
    expect(((await after.json()) as { calls: number }).calls).toBe(5 + BULK_ROWS);
  });

  it('an unknown agentId in member-stats is a 404, not an empty answer', async () => {
    const res = await get(`/api/dashboard/member-stats?agentId=${randomUUID()}`);
    expect(res.statusCode).toBe(404);
  });
});

describe('an entry without an MCP session (last: it adds an entry the counts above do not expect)', () => {
  it('an entry of a call without an MCP session leaves `sessionId` out, and the rest stays', async () => {
    const lone = makeEntry({
      agentId: agent.support, agentName: 'Support Desk', memberId: memberOf[agent.support]!.member!, memberName: roles.email.member!,
      sessionId: '', timestamp: '2026-08-01T00:00:00.000Z', reason: 'no-session', toolArgs: { nested: { list: [1, 'two', null] } },
    });
    await audit.store.insert([lone]);
    const { entries } = (await get(`/api/audit?agentId=${agent.support}&to=2026-08-01`)).json() as { entries: Array<Record<string, unknown>> };
    expect(entries).toHaveLength(1);
    expect(entries[0]).not.toHaveProperty('sessionId');
    expect(entries[0]).toMatchObject({ id: lone.id, reason: 'no-session', toolArgs: { nested: { list: [1, 'two', null] } }, matchedPolicyIds: [], policyVersionIds: [], policyDbIds: [] });
    expect(Object.keys(entries[0]!)).toHaveLength(22);
  });
});
