import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditEntry } from '@portcullis/core';
import type { AuditService } from '@portcullis/audit';
import { signInRoleActors, type Actor, type ApiHarness, type RoleActors } from '@portcullis/gateway/testing';
import { makeEntry } from '../../services/audit/src/testing/audit-entries.ts';
import { startAuditApiHarness, type AuditApiHarness } from '../support/audit-api-harness.ts';

/**
 * GET /api/audit/histogram and GET /api/dashboard/overview (decision 037) through the
 * gateway's `/api` with a real audit service (chDB) over gRPC on loopback: the series add up
 * to GET /api/audit's `total` for the same filters and caller, policy identities of a trusted
 * agent stay hidden from its members, pending approvals come from Postgres.
 */

const P_SUPPORT = '0195f0a0-0000-7000-8000-0000000002f1';
const P_TRUSTED = '0195f0a0-0000-7000-8000-0000000002f9';
const DAY0 = Date.UTC(2026, 9, 20);
const at = (minutes: number) => new Date(DAY0 + minutes * 60_000).toISOString();

let h: ApiHarness;
let roles: RoleActors;
let audit: AuditService;
let harness: AuditApiHarness;
let memberIdOf: AuditApiHarness['memberIdOf'];
const agent = { support: '', trusted: '', outsiders: '' };
const memberOf: Record<string, Partial<Record<Actor, string>>> = {};

beforeAll(async () => {
  harness = await startAuditApiHarness('overview');
  ({ h, audit, memberIdOf } = harness);
  roles = await signInRoleActors(h, 'overview');
  agent.support = await roles.agentWithMembers({ name: 'Support Desk' });
  agent.trusted = await roles.agentWithMembers({ name: 'Trusted Ops', type: 'trusted' });
  agent.outsiders = (await h.request({ method: 'POST', url: '/api/agents', payload: { name: 'Outsider Own' }, cookie: roles.cookieOf.outsider! })).json().id;
  for (const id of [agent.support, agent.trusted]) {
    memberOf[id] = { owner: await memberIdOf(id, roles.email.owner), member: await memberIdOf(id, roles.email.member) };
  }
  memberOf[agent.outsiders] = { outsider: await memberIdOf(agent.outsiders, roles.email.outsider) };

  const entry = (agentId: string, agentName: string, actor: Actor, over: Partial<AuditEntry>) => makeEntry({
    agentId, agentName, memberId: memberOf[agentId]![actor]!, memberName: roles.email[actor as Exclude<Actor, 'anonymous'>], ...over,
  });
  const entries: AuditEntry[] = [];
  // Support Desk: a call every 7 minutes over two days, every fifth denied by a policy, every eleventh an upstream error.
  for (let i = 0; i < 400; i++) {
    const denied = i % 5 === 0;
    entries.push(entry(agent.support, 'Support Desk', i % 2 ? 'member' : 'owner', {
      timestamp: at(i * 7), service: i % 3 ? 'github' : 'slack', tool: i % 3 ? 'delete_repository' : 'post_message',
      decision: denied ? 'DENY' : 'ALLOW',
      reason: denied ? 'Denied by policy "No deletes"' : i % 11 === 0 ? 'No forbid policy matched; upstream error: 502 Bad Gateway' : 'No forbid policy matched',
      ...(denied ? { matchedPolicyIds: ['no-deletes'], matchedPolicyNames: ['No deletes'], policyDbIds: [P_SUPPORT] } : {}),
    }));
  }
  for (let i = 0; i < 30; i++) {
    entries.push(entry(agent.trusted, 'Trusted Ops', i % 2 ? 'member' : 'owner', {
      timestamp: at(60 + i * 45), service: 'linear', tool: 'delete_issue', decision: 'DENY', reason: 'Denied by policy "Trusted secret name"',
      matchedPolicyIds: ['trusted-secret-key'], matchedPolicyNames: ['Trusted secret name'], policyDbIds: [P_TRUSTED],
    }));
  }
  entries.push(entry(agent.outsiders, 'Outsider Own', 'outsider', { timestamp: at(100), decision: 'DENY', policyDbIds: [P_SUPPORT] }));
  await audit.store.insert(entries);
});

afterAll(async () => { await harness?.close(); });

const get = (url: string, actor: Actor = 'owner') => h.request({ method: 'GET', url, ...(roles.cookieOf[actor] ? { cookie: roles.cookieOf[actor] } : {}) });
async function json<T>(url: string, actor: Actor = 'owner'): Promise<T> {
  const res = await get(url, actor);
  expect(res.statusCode, `${url}: ${res.body}`).toBe(200);
  return res.json() as T;
}
type Histogram = { bucketSeconds: number; buckets: Array<{ start: string; calls: number; denies: number }> };
const sums = (h: Histogram) => h.buckets.reduce((s, b) => ({ calls: s.calls + b.calls, denies: s.denies + b.denies }), { calls: 0, denies: 0 });
const totalOf = async (query: string, actor: Actor = 'owner') => (await json<{ total: number }>(`/api/audit?limit=1&${query}`, actor)).total;

describe('GET /api/audit/histogram', () => {
  const filters = [
    '', `from=${at(0)}&to=${at(24 * 60)}`, 'from=2026-10-20&to=2026-10-20', `from=${at(600)}`, `to=${at(600)}`,
    'result=DENY', 'result=ALLOW', 'service=slack', 'tool=DELETE', 'agent=trusted', `policy=${P_SUPPORT}`, `policy=${P_TRUSTED}`,
    'member=nobody', 'service=nope',
    // Injection strings are bound values: they match nothing, like in the list.
    `agent=${encodeURIComponent("' OR 1=1 --")}`, `member=${encodeURIComponent("x' OR 1=1; DROP TABLE audit_entries; --")}`, 'tool=%25&agent=_',
  ];
  it.each(filters.flatMap((q) => (['owner', 'member', 'outsider'] as const).map((actor) => [q, actor] as const)))(
    'adds up to GET /api/audit\'s total for the same filters and caller: "%s" as %s', async (query, actor) => {
      const histogram = await json<Histogram>(`/api/audit/histogram?${query}`, actor);
      const denyQuery = [...query.split('&').filter((p) => p && !p.startsWith('result=')), 'result=DENY'].join('&');
      const [calls, denies] = await Promise.all([totalOf(query, actor), query.includes('result=ALLOW') ? 0 : totalOf(denyQuery, actor)]);
      expect(sums(histogram)).toEqual({ calls, denies });
      expect(histogram.buckets.length).toBeLessThanOrEqual(200);
    });

  it('buckets a day in 15 minutes, aligned, oldest first, empty buckets included', async () => {
    const histogram = await json<Histogram>(`/api/audit/histogram?from=${at(0)}&to=${at(24 * 60 - 1)}&agent=support`);
    expect(histogram.bucketSeconds).toBe(900);
    expect(histogram.buckets).toHaveLength(96);
    expect(histogram.buckets[0]).toEqual({ start: at(0), calls: 3, denies: 1 }); // minutes 0, 7, 14
    expect(histogram.buckets.map((b) => b.start)).toEqual([...histogram.buckets.map((b) => b.start)].sort());
  });

  it('hides nothing it should not: a member filtering by a trusted agent\'s policy finds nothing, as in the list', async () => {
    expect(sums(await json<Histogram>(`/api/audit/histogram?policy=${P_TRUSTED}`, 'member')).calls).toBe(0);
    expect(sums(await json<Histogram>(`/api/audit/histogram?policy=${P_TRUSTED}`, 'owner')).calls).toBe(30);
  });
});

interface Overview {
  series: Histogram;
  totals: { calls: number; denies: number };
  topDeniedTools: Array<{ service: string; tool: string; denies: number }>;
  topDeniedPolicies: Array<{ policyId: string; policyKey: string; name: string; agentId: string; agentName: string; denies: number }>;
  memberDenyRates: Array<{ memberId: string; memberName: string; agentId: string; agentName: string; calls: number; denies: number; denyRate: number }>;
  agentsWithErrors: Array<{ agentId: string; agentName: string; errors: number; lastErrorAt: string }>;
  pendingApprovals: { total: number; members: Array<{ agentId: string; agentName: string; memberId: string; email: string; requestedAt: string }> };
}

describe('GET /api/dashboard/overview', () => {
  it.each([
    ['the whole data', ''],
    ['a day', `from=${at(0)}&to=${at(24 * 60 - 1)}`],
    ['an hour', `from=${at(60)}&to=${at(119)}`],
    ['from only', `from=${at(1000)}`],
  ])('its series adds up to GET /api/audit\'s total for the same range, for every caller: %s', async (_label, range) => {
    for (const actor of ['owner', 'member', 'outsider', 'pending'] as const) {
      const o = await json<Overview>(`/api/dashboard/overview?${range}`, actor);
      const calls = await totalOf(range, actor);
      const denies = await totalOf(`${range}&result=DENY`, actor);
      expect(sums(o.series), actor).toEqual({ calls, denies });
      expect(o.totals, actor).toEqual({ calls, denies });
    }
  });

  it('narrows to one agent with agentId, like GET /api/audit?agent', async () => {
    const o = await json<Overview>(`/api/dashboard/overview?agentId=${agent.trusted}`);
    expect(o.totals).toEqual({ calls: 30, denies: 30 });
    expect(o.totals.calls).toBe(await totalOf('agent=trusted'));
    expect(o.topDeniedTools).toEqual([{ service: 'linear', tool: 'delete_issue', denies: 30 }]);
  });

  it('lists top denied tools and policies, deny rates per member and agents with upstream errors (current names)', async () => {
    const o = await json<Overview>('/api/dashboard/overview');
    // Support Desk denies every fifth of its 400 calls (80), a third of them on slack; Trusted Ops 30.
    expect(o.topDeniedTools).toEqual([
      { service: 'github', tool: 'delete_repository', denies: 53 },
      { service: 'linear', tool: 'delete_issue', denies: 30 },
      { service: 'slack', tool: 'post_message', denies: 27 },
    ]);
    expect(o.topDeniedTools.reduce((n, t) => n + t.denies, 0)).toBe(o.totals.denies);
    expect(o.topDeniedPolicies).toEqual([
      { policyId: P_SUPPORT, policyKey: 'no-deletes', name: 'No deletes', agentId: agent.support, agentName: 'Support Desk', denies: 80 },
      { policyId: P_TRUSTED, policyKey: 'trusted-secret-key', name: 'Trusted secret name', agentId: agent.trusted, agentName: 'Trusted Ops', denies: 30 },
    ]);
    // One row per membership (a member id is one person on one agent), every call counted once.
    expect(o.memberDenyRates.map((m) => [m.memberName, m.agentName]).sort()).toEqual([
      [roles.email.member, 'Support Desk'], [roles.email.member, 'Trusted Ops'], [roles.email.owner, 'Support Desk'], [roles.email.owner, 'Trusted Ops'],
    ]);
    expect(o.memberDenyRates.reduce((n, m) => n + m.calls, 0)).toBe(o.totals.calls);
    const ownerOnSupport = o.memberDenyRates.find((m) => m.memberId === memberOf[agent.support]!.owner)!;
    expect(ownerOnSupport).toMatchObject({ agentId: agent.support, calls: 200, denies: 40, denyRate: 0.2 });
    expect(o.memberDenyRates.slice(0, 2).map((m) => [m.agentName, m.denies, m.denyRate])).toEqual([['Support Desk', 40, 0.2], ['Support Desk', 40, 0.2]]);
    // Every eleventh Support Desk call that was not denied (i % 11 = 0, i % 5 ≠ 0, i < 400): 29; the last at i = 396.
    expect(o.agentsWithErrors).toEqual([{ agentId: agent.support, agentName: 'Support Desk', errors: 29, lastErrorAt: at(396 * 7) }]);

    const renamed = await h.request({ method: 'PUT', url: `/api/agents/${agent.support}`, payload: { name: 'Help Desk' }, cookie: roles.cookieOf.owner! });
    expect(renamed.statusCode).toBe(200);
    try {
      const after = await json<Overview>('/api/dashboard/overview');
      expect(after.agentsWithErrors[0]!.agentName).toBe('Help Desk');
      expect(after.topDeniedPolicies[0]!.agentName).toBe('Help Desk');
    } finally {
      await h.request({ method: 'PUT', url: `/api/agents/${agent.support}`, payload: { name: 'Support Desk' }, cookie: roles.cookieOf.owner! });
    }
  });

  it('never names a trusted agent\'s policies to a member who is not its owner (decision 022)', async () => {
    const res = await get('/api/dashboard/overview', 'member');
    expect(res.statusCode).toBe(200);
    const o = res.json() as Overview;
    expect(o.topDeniedPolicies.map((p) => p.policyId)).toEqual([P_SUPPORT]);
    expect(res.body).not.toContain(P_TRUSTED);
    expect(res.body).not.toContain('trusted-secret-key');
    expect(res.body).not.toContain('Trusted secret name');
    // Their denies still count: the entries are the member's to see.
    expect(o.topDeniedTools.find((t) => t.tool === 'delete_issue')?.denies).toBe(30);
  });

  it('shows pending approvals of the owned agents to their owner only, and nothing of another user\'s agent to an outsider', async () => {
    const owner = await json<Overview>('/api/dashboard/overview');
    expect(owner.pendingApprovals.total).toBe(2);
    expect(owner.pendingApprovals.members.map((m) => [m.agentName, m.email]).sort()).toEqual([['Support Desk', roles.email.pending], ['Trusted Ops', roles.email.pending]]);
    expect((await json<Overview>('/api/dashboard/overview', 'member')).pendingApprovals).toEqual({ total: 0, members: [] });
    const outsider = await json<Overview>('/api/dashboard/overview', 'outsider');
    expect(outsider.totals).toEqual({ calls: 1, denies: 1 });
    expect(outsider.topDeniedPolicies).toEqual([{ policyId: P_SUPPORT, policyKey: '', name: '', agentId: agent.outsiders, agentName: 'Outsider Own', denies: 1 }]);
    expect(outsider.memberDenyRates.map((m) => m.memberName)).toEqual([roles.email.outsider]);
  });

  it('answers an empty overview to a caller with no agent', async () => {
    const o = await json<Overview>('/api/dashboard/overview', 'rejected');
    expect(o).toEqual({
      series: { bucketSeconds: 60, buckets: [] }, totals: { calls: 0, denies: 0 }, topDeniedTools: [], topDeniedPolicies: [], memberDenyRates: [], agentsWithErrors: [],
      pendingApprovals: { total: 0, members: [] },
    });
  });
});
