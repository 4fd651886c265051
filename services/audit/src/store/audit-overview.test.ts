import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditEntry, AuditFilterMsg } from '@portcullis/core';
import { parseFilter } from '../handlers/parse-request.ts';
import { makeEntry, makeTempDir } from '../testing/audit-entries.ts';
import { openAuditStore, type AuditStore } from './audit-store.ts';

/**
 * `histogram` and `overview` (decision 037) on a real store (chDB): the buckets add up to
 * `query`'s total for the same filter — redelivered entries once, calls still open (write-ahead
 * records without their completion) included — and the overview's lists.
 */

const A1 = 'agent-ov-1', A2 = 'agent-ov-2', HIDDEN = 'agent-ov-hidden';
const M1 = '0195f0a0-0000-7000-8000-000000000101';
const M2 = '0195f0a0-0000-7000-8000-000000000102';
const P1 = '0195f0a0-0000-7000-8000-0000000001f1';
const P2 = '0195f0a0-0000-7000-8000-0000000001f2';
const DAY0 = Date.UTC(2026, 9, 10);
const at = (minutes: number) => new Date(DAY0 + minutes * 60_000).toISOString();

const deny = (over: Partial<AuditEntry>) => makeEntry({ decision: 'DENY', reason: 'Denied by policy "No deletes"', ...over });
const entries: AuditEntry[] = [
  makeEntry({ agentId: A1, agentName: 'Ops', memberId: M1, memberName: 'maria@example.com', timestamp: at(0), service: 'github', tool: 'create_issue' }),
  makeEntry({ agentId: A1, agentName: 'Ops', memberId: M1, memberName: 'maria@example.com', timestamp: at(5), service: 'github', tool: 'create_issue', reason: 'No forbid policy matched; upstream error: 503' }),
  deny({ agentId: A1, agentName: 'Ops', memberId: M2, memberName: 'li@example.com', timestamp: at(61), service: 'github', tool: 'delete_repository', matchedPolicyIds: ['no-deletes'], matchedPolicyNames: ['No deletes'], policyDbIds: [P1] }),
  deny({ agentId: A1, agentName: 'Ops', memberId: M2, memberName: 'li@example.com', timestamp: at(62), service: 'github', tool: 'delete_repository', matchedPolicyIds: ['no-deletes', 'repo-guard'], matchedPolicyNames: ['No deletes', 'Repo guard'], policyDbIds: [P1, P2] }),
  deny({ agentId: A2, agentName: 'Night shift', memberId: M2, memberName: 'li@example.com', timestamp: at(600), service: 'slack', tool: 'post_message', matchedPolicyIds: ['quiet'], matchedPolicyNames: ['Quiet hours'], policyDbIds: ['0195f0a0-0000-7000-8000-0000000001f9'] }),
  makeEntry({ agentId: A2, agentName: 'Night shift', memberId: M1, memberName: 'maria@example.com', timestamp: at(24 * 60 + 30), service: 'mcp', tool: 'initialize', action: 'Portcullis::Action::"initialize"', decision: 'DENY', reason: 'Agent is disabled' }),
  deny({ agentId: HIDDEN, agentName: 'Not yours', timestamp: at(30), policyDbIds: [P1] }),
];
/** A call still open: its write-ahead record, no completion yet (kept in `audit_open`). */
const open = makeEntry({ agentId: A1, agentName: 'Ops', memberId: M1, memberName: 'maria@example.com', timestamp: at(120), stage: 'decision', reason: 'No forbid policy matched; outcome not recorded' });

const dir = makeTempDir('overview');
let store: AuditStore;

beforeAll(async () => {
  store = await openAuditStore({ target: { kind: 'chdb', path: join(dir.path, 'audit') }, database: 'portcullis' });
  await store.insert(entries);
  await store.insert(entries.slice(2, 5)); // redelivered: stored once
  await store.insert([open, open]);
});

afterAll(async () => {
  await store?.close();
  dir.remove();
});

const wire = (over: Partial<AuditFilterMsg>) =>
  parseFilter({ agentIds: [A1, A2], from: '', to: '', agent: '', service: '', tool: '', result: '', member: '', policy: '', ...over });
const sum = (h: { buckets: Array<{ calls: number; denies: number }> }) =>
  h.buckets.reduce((s, b) => ({ calls: s.calls + b.calls, denies: s.denies + b.denies }), { calls: 0, denies: 0 });

describe('histogram', () => {
  it.each<[string, Partial<AuditFilterMsg>]>([
    ['no filter (range from the data)', {}],
    ['an explicit range', { from: at(0), to: at(24 * 60) }],
    ['only from', { from: at(60) }],
    ['only to', { to: at(90) }],
    ['result', { result: 'DENY' }],
    ['agent substring', { agent: 'night' }],
    ['tool substring', { tool: 'DELETE' }],
    ['service', { service: 'github' }],
    ['member', { member: M1 }],
    ['policy', { policy: P1 }],
    ['no visible agent', { agentIds: [] }],
    ['nothing matches', { service: 'nope' }],
  ])('adds up to query\'s total: %s', async (_label, over) => {
    const filter = wire(over);
    const [h, { total }, denied] = await Promise.all([
      store.histogram(filter), store.query(filter, { limit: 1, offset: 0 }), store.query({ ...filter, result: 'DENY' }, { limit: 1, offset: 0 }),
    ]);
    expect(sum(h)).toEqual({ calls: total, denies: filter.result === 'ALLOW' ? 0 : denied.total });
    expect(h.buckets.length).toBeLessThanOrEqual(200);
  });

  it('buckets a day in 15 minutes, aligned, with empty buckets included, oldest first', async () => {
    const h = await store.histogram(wire({ from: at(0), to: at(24 * 60 - 1) }));
    expect(h.bucketSeconds).toBe(900);
    expect(h.buckets).toHaveLength(96);
    expect(h.buckets[0]).toEqual({ start: at(0), calls: 2, denies: 0 });
    expect(h.buckets[4]).toEqual({ start: at(60), calls: 2, denies: 2 });
    expect(h.buckets[8]).toEqual({ start: at(120), calls: 1, denies: 0 }); // the open call
    expect(h.buckets[40]).toEqual({ start: at(600), calls: 1, denies: 1 });
    expect(h.buckets[1]).toEqual({ start: at(15), calls: 0, denies: 0 });
  });

  it('answers no buckets when nothing matches and no range was given', async () => {
    expect(await store.histogram(wire({ service: 'nope' }))).toEqual({ bucketSeconds: 60, buckets: [] });
    expect((await store.histogram(wire({ service: 'nope', from: at(0), to: at(59) }))).buckets).toHaveLength(60);
  });
});

describe('overview', () => {
  const overview = (over: { from?: Date; to?: Date; policyAgentIds?: string[] } = {}) =>
    store.overview({ agentIds: [A1, A2], policyAgentIds: [A1, A2], top: 10, ...over });

  it('totals its series, which adds up to the tool calls among query\'s entries for the same agents and range (decision 071)', async () => {
    const from = new Date(at(0)), to = new Date(at(24 * 60 + 59));
    const o = await overview({ from, to });
    const { total } = await store.query({ agentIds: [A1, A2], from, to }, { limit: 1, offset: 0 });
    // The refused `initialize` is listed, not counted as a call.
    expect(sum(o.series)).toEqual({ calls: total - 1, denies: 3 });
    expect({ calls: o.calls, denies: o.denies }).toEqual({ calls: 6, denies: 3 });
    expect(o.calls).toBe((await store.stats({ agentIds: [A1, A2], from, to })).calls);
  });

  it('lists top denied tools, top denied policies, deny rates per member and agents with upstream errors', async () => {
    const o = await overview();
    expect(o.topDeniedTools).toEqual([
      { service: 'github', tool: 'delete_repository', denies: 2 },
      { service: 'slack', tool: 'post_message', denies: 1 },
    ]);
    expect(o.topDeniedPolicies).toEqual([
      { policyDbId: P1, policyKey: 'no-deletes', policyName: 'No deletes', agentId: A1, denies: 2 },
      { policyDbId: P2, policyKey: 'repo-guard', policyName: 'Repo guard', agentId: A1, denies: 1 },
      { policyDbId: '0195f0a0-0000-7000-8000-0000000001f9', policyKey: 'quiet', policyName: 'Quiet hours', agentId: A2, denies: 1 },
    ]);
    expect(o.memberDenyRates).toEqual([
      { memberId: M2, memberName: 'li@example.com', agentId: expect.any(String), calls: 3, denies: 3 },
      { memberId: M1, memberName: 'maria@example.com', agentId: expect.any(String), calls: 3, denies: 0 },
    ]);
    expect(o.agentsWithErrors).toEqual([{ agentId: A1, agentName: 'Ops', errors: 1, lastErrorAt: at(5) }]);
  });

  it('names no policy of an agent whose policy identities the caller may not see, and honours the range and `top`', async () => {
    const hidden = await overview({ policyAgentIds: [A2] });
    expect(hidden.topDeniedPolicies.map((p) => p.policyKey)).toEqual(['quiet']);
    expect((await overview({ policyAgentIds: [] })).topDeniedPolicies).toEqual([]);
    const later = await overview({ from: new Date(at(61)), to: new Date(at(62)) });
    expect({ calls: later.calls, denies: later.denies, errors: later.agentsWithErrors }).toEqual({ calls: 2, denies: 2, errors: [] });
    const one = await store.overview({ agentIds: [A1, A2], policyAgentIds: [A1, A2], top: 1 });
    expect([one.topDeniedTools.length, one.topDeniedPolicies.length, one.memberDenyRates.length]).toEqual([1, 1, 1]);
  });

  it('is empty for no agents', async () => {
    expect(await store.overview({ agentIds: [], policyAgentIds: [], top: 10 })).toEqual({
      series: { bucketSeconds: 60, buckets: [] }, calls: 0, denies: 0, topDeniedTools: [], topDeniedPolicies: [], memberDenyRates: [], agentsWithErrors: [],
    });
  });
});

describe('one definition of a call (issue 30, decision 071)', () => {
  // A tool call is any entry but a protocol request (`Portcullis::Action::"<method>"`, or the
  // legacy service `mcp`) and an approval's events; a tool call with an unknown name is a call.
  const C = 'agent-ov-calls';
  const of = (over: Partial<AuditEntry>) => makeEntry({ agentId: C, agentName: 'Counted', memberId: M1, memberName: 'maria@example.com', sessionId: 'session-calls', ...over });
  const counted = [
    of({ timestamp: at(3000), service: 'github', tool: 'create_issue' }),
    deny({ agentId: C, agentName: 'Counted', memberId: M1, memberName: 'maria@example.com', sessionId: 'session-calls', timestamp: at(3001), service: 'github', tool: 'delete_repository' }),
    of({ timestamp: at(3002), service: 'slack', tool: 'list_channels_typo', action: 'SlackMCP::Action::"list_channels_typo"', resource: 'SlackMCP::Service::"slack"', decision: 'DENY', reason: 'Unknown tool "slack__list_channels_typo".' }),
    of({ timestamp: at(3003), service: '', tool: 'nope__x', action: 'Portcullis::Action::"tools/call"', resource: `Portcullis::Agent::"${C}"`, decision: 'DENY', reason: 'Unknown tool "nope__x".' }),
  ];
  const notCalls = [
    of({ timestamp: at(3004), service: '', tool: 'initialize', action: 'Portcullis::Action::"initialize"', resource: `Portcullis::Agent::"${C}"`, decision: 'DENY', reason: 'Agent is disabled' }),
    of({ timestamp: at(3005), service: 'mcp', tool: 'tools/list', action: 'Portcullis::Action::"tools/list"', resource: `Portcullis::Agent::"${C}"`, decision: 'DENY', reason: 'Agent is disabled' }),
    of({ timestamp: at(3006), service: 'github', tool: 'delete_repository', decision: 'DENY', approvalId: '0190f1a2-0000-7000-8000-00000000c071', approvalEvent: 'denied', reason: 'Denied by an owner' }),
  ];

  beforeAll(async () => {
    await store.insert([...counted, ...notCalls]);
  });

  it('stats, the overview (totals, series, top denied tools, deny rates), member stats and session activity count the same calls', async () => {
    const filter = { agentIds: [C] };
    const [stats, o, members, session] = await Promise.all([
      store.stats(filter), store.overview({ ...filter, policyAgentIds: [C], top: 10 }), store.memberStats(filter), store.sessionActivity(C, 'session-calls'),
    ]);
    expect(stats).toEqual({ calls: 4, allowed: 1, denied: 3 });
    expect({ calls: o.calls, denies: o.denies }).toEqual({ calls: 4, denies: 3 });
    expect(sum(o.series)).toEqual({ calls: 4, denies: 3 });
    expect(o.topDeniedTools).toEqual([
      { service: '', tool: 'nope__x', denies: 1 },
      { service: 'github', tool: 'delete_repository', denies: 1 },
      { service: 'slack', tool: 'list_channels_typo', denies: 1 },
    ]);
    expect(o.memberDenyRates).toEqual([{ memberId: M1, memberName: 'maria@example.com', agentId: C, calls: 4, denies: 3 }]);
    expect(members.map((m) => [m.calls, m.allowed, m.denied])).toEqual([[4, 1, 3]]);
    expect([session.calls, session.allowed, session.denied]).toEqual([4, 1, 3]);
    // The entries themselves stay in the log.
    expect((await store.query(filter, { limit: 10, offset: 0 })).total).toBe(7);
  });
});
