import { join } from 'node:path';
import { Session } from 'chdb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditEntry, AuditFilterMsg } from '@portcullis/core';
import { parseFilter } from '../handlers/parse-request.ts';
import { makeEntry, makeTempDir } from '../testing/audit-entries.ts';
import type { AuditFilter } from './audit-filter.ts';
import { openAuditStore, type AuditStore } from './audit-store.ts';

const A1 = 'agent-0001', A2 = 'agent-0002', A3 = 'agent-0003', BULK = 'agent-bulk';
const M1 = '0195f0a0-0000-7000-8000-000000000001';
const M2 = '0195f0a0-0000-7000-8000-000000000002';
const M3 = '0195f0a0-0000-7000-8000-000000000003';
const P1 = '0195f0a0-0000-7000-8000-0000000000f1';
const P2 = '0195f0a0-0000-7000-8000-0000000000f2';

/** The filter data set: ids e1…e6 in time order; e6 belongs to an agent the caller cannot see. */
const fixtures: Record<string, AuditEntry> = {
  e1: makeEntry({ agentId: A1, agentName: 'Support Assistant', timestamp: '2026-10-01T00:00:00.000Z', service: 'github', tool: 'create_issue', decision: 'ALLOW', memberId: M1, memberName: 'maria@example.com' }),
  e2: makeEntry({ agentId: A1, agentName: 'Support Assistant', timestamp: '2026-10-01T12:00:00.000Z', service: 'github', tool: 'list_issues', decision: 'DENY', memberId: M2, memberName: 'li@example.com', matchedPolicyIds: ['night-forbid'], policyDbIds: [P1] }),
  e3: makeEntry({ agentId: A2, agentName: 'DevOps Copilot', timestamp: '2026-10-02T00:00:00.000Z', service: 'slack', tool: 'post_message', decision: 'ALLOW', memberId: M1, memberName: 'maria@example.com' }),
  e4: makeEntry({ agentId: A2, agentName: 'DevOps Copilot', timestamp: '2026-10-02T23:59:59.999Z', service: 'slack', tool: 'delete_channel', decision: 'DENY', memberId: M2, memberName: 'li@example.com', matchedPolicyIds: ['night-forbid', 'chan-guard'], policyDbIds: [P1, P2] }),
  e5: makeEntry({ agentId: A1, agentName: 'Support Assistant', timestamp: '2026-10-03T08:00:00.000Z', service: 'linear', tool: 'create_issue', decision: 'ALLOW', memberId: M3, memberName: 'sam@example.com' }),
  e6: makeEntry({ agentId: A3, agentName: 'Hidden Agent', timestamp: '2026-10-02T06:00:00.000Z', service: 'github', tool: 'create_issue', decision: 'DENY', memberId: M1, memberName: 'maria@example.com', policyDbIds: [P1] }),
};
const nameOf = new Map(Object.entries(fixtures).map(([name, entry]) => [entry.id, name]));
const visible = [A1, A2];

const dir = makeTempDir('store');
let store: AuditStore;

beforeAll(async () => {
  store = await openAuditStore({ target: { kind: 'chdb', path: join(dir.path, 'audit') }, database: 'portcullis' });
  const all = Object.values(fixtures);
  await store.insert(all.slice(0, 3));
  await store.insert(all.slice(3));
});

afterAll(async () => {
  await store?.close();
  dir.remove();
});

const wire = (over: Partial<AuditFilterMsg>): AuditFilter =>
  parseFilter({ agentIds: visible, from: '', to: '', agent: '', service: '', tool: '', result: '', member: '', policy: '', ...over });
const names = (entries: AuditEntry[]) => entries.map((e) => nameOf.get(e.id) ?? e.id);

describe('Query filter rules (spec "Query parameters of GET /api/audit")', () => {
  it.each<[string, Partial<AuditFilterMsg>, string[]]>([
    ['no filter: every visible entry, newest first', {}, ['e5', 'e4', 'e3', 'e2', 'e1']],
    ['agent_ids empty → no rows', { agentIds: [] }, []],
    ['agent_ids scope to the listed agents only', { agentIds: [A3] }, ['e6']],
    ['agent_ids unknown agent → no rows', { agentIds: ['agent-nope'] }, []],
    ['from is inclusive', { from: '2026-10-02T00:00:00.000Z' }, ['e5', 'e4', 'e3']],
    ['to is inclusive', { to: '2026-10-02T00:00:00.000Z' }, ['e3', 'e2', 'e1']],
    ['from + to, date-only = whole days', { from: '2026-10-02', to: '2026-10-02' }, ['e4', 'e3']],
    ['from with an offset', { from: '2026-10-02T01:59:59.999+02:00' }, ['e5', 'e4', 'e3']],
    ['bounds beyond DateTime64 are clamped, not errors', { from: '1000-01-01', to: '9999-12-31' }, ['e5', 'e4', 'e3', 'e2', 'e1']],
    ['to one millisecond before an entry excludes it', { to: '2026-10-02T23:59:59.998Z', from: '2026-10-02' }, ['e3']],
    ['agent: case-insensitive substring', { agent: 'ASSIST' }, ['e5', 'e2', 'e1']],
    ['agent: substring in the middle', { agent: 'ops co' }, ['e4', 'e3']],
    ['agent: no match', { agent: 'xyz' }, []],
    ['agent: % is literal, not a wildcard', { agent: '%' }, []],
    ['service: exact', { service: 'github' }, ['e2', 'e1']],
    ['service: not case-insensitive', { service: 'GitHub' }, []],
    ['service: not a substring', { service: 'git' }, []],
    ['tool: case-insensitive substring', { tool: 'ISSUE' }, ['e5', 'e2', 'e1']],
    ['tool: longer substring', { tool: 'issues' }, ['e2']],
    ['tool: _ is literal', { tool: 'create_' }, ['e5', 'e1']],
    ['result DENY', { result: 'DENY' }, ['e4', 'e2']],
    ['result ALLOW', { result: 'ALLOW' }, ['e5', 'e3', 'e1']],
    ['member: exact member id', { member: M1 }, ['e3', 'e1']],
    ['member: an e-mail matches nothing', { member: 'maria@example.com' }, []],
    ['member: a prefix of the id matches nothing', { member: M1.slice(0, 8) }, []],
    ['policy: exact policy db id', { policy: P1 }, ['e4', 'e2']],
    ['policy: second of several ids', { policy: P2 }, ['e4']],
    ['policy: a policy key matches nothing', { policy: 'night-forbid' }, []],
    ['filters combine with AND', { service: 'github', result: 'DENY' }, ['e2']],
    ['an injection string is just a value', { agent: "' OR 1=1 --" }, []],
  ])('%s', async (_label, over, expected) => {
    const { entries, total } = await store.query(wire(over), { limit: 500, offset: 0 });
    expect(names(entries)).toEqual(expected);
    expect(total).toBe(expected.length);
  });

  it('returns entries exactly as written', async () => {
    const { entries } = await store.query(wire({ member: M3 }), { limit: 500, offset: 0 });
    expect(entries).toEqual([fixtures.e5]);
  });
});

describe('paging', () => {
  const bulk = Array.from({ length: 520 }, (_, i) =>
    makeEntry({ agentId: BULK, agentName: 'Bulk', timestamp: new Date(Date.UTC(2026, 9, 5) + i * 1_000).toISOString() }));

  beforeAll(async () => {
    await store.insert(bulk);
  });

  it('limit and offset page through newest first; total counts every match', async () => {
    const newestFirst = [...bulk].reverse().map((e) => e.id);
    const first = await store.query({ agentIds: [BULK] }, { limit: 500, offset: 0 });
    expect(first.entries.map((e) => e.id)).toEqual(newestFirst.slice(0, 500));
    expect(first.total).toBe(520);
    const second = await store.query({ agentIds: [BULK] }, { limit: 500, offset: 500 });
    expect(second.entries.map((e) => e.id)).toEqual(newestFirst.slice(500));
    expect(second.total).toBe(520);
    const middle = await store.query({ agentIds: [BULK] }, { limit: 3, offset: 10 });
    expect(middle.entries.map((e) => e.id)).toEqual(newestFirst.slice(10, 13));
  });

  it('breaks timestamp ties by id, so pages never overlap', async () => {
    const tied = Array.from({ length: 6 }, () => makeEntry({ agentId: 'agent-tie', timestamp: '2026-10-06T00:00:00.000Z' }));
    await store.insert(tied);
    const pages = [0, 2, 4].map((offset) => store.query({ agentIds: ['agent-tie'] }, { limit: 2, offset }));
    const ids = (await Promise.all(pages)).flatMap((p) => p.entries.map((e) => e.id));
    expect(new Set(ids).size).toBe(6);
  });
});

describe('redelivered entries', () => {
  it('the same entries inserted twice are read once by query, total, stream and stats', async () => {
    const agentId = 'agent-dup';
    const entries = Array.from({ length: 40 }, (_, i) =>
      makeEntry({ agentId, timestamp: new Date(Date.UTC(2026, 9, 7) + i).toISOString(), decision: i % 4 === 0 ? 'DENY' : 'ALLOW' }));
    await store.insert(entries);
    await store.insert(entries.slice(0, 25));
    await store.insert(entries.slice(10));

    const { entries: read, total } = await store.query({ agentIds: [agentId] }, { limit: 500, offset: 0 });
    expect(total).toBe(40);
    expect(read.map((e) => e.id).sort()).toEqual(entries.map((e) => e.id).sort());

    const streamed: string[] = [];
    for await (const batch of store.stream({ agentIds: [agentId] }, { limit: 0, offset: 0 })) streamed.push(...batch.map((e) => e.id));
    expect(streamed.sort()).toEqual(entries.map((e) => e.id).sort());

    expect(await store.stats({ agentIds: [agentId] })).toEqual({ calls: 40, allowed: 30, denied: 10 });
  });
});

describe('ingest from the bus\'s JSON (migration 009)', () => {
  it('entries inserted as the bytes the bus carried read back as the entries, every field', async () => {
    const agentId = 'agent-ingest-bytes';
    const entries = [
      makeEntry({ agentId, timestamp: '2026-10-09T10:00:00.000Z', toolArgs: { q: 'héllo "x"\n\u2028', nested: { a: [1, 2.5, null, true] } }, sessionId: 's-1', oauthClientId: 'client-1', shadowDecision: 'DENY', shadowPolicyIds: ['k1'], shadowPolicyDbIds: [P1] }),
      makeEntry({ agentId, timestamp: '2026-10-09T10:00:00.001Z', matchedPolicyIds: ['a', 'b'], matchedPolicyNames: ['A', 'B'], policyVersionIds: ['v1'], policyDbIds: [P2], decision: 'DENY', durationMs: 12.345 }),
      // Not UTC to the millisecond: written from the entry, its instant normalised.
      makeEntry({ agentId, timestamp: '2026-10-09T12:00:00.002+02:00' }),
    ];
    const { sessionId: _none, ...withoutSession } = entries[1]!;
    entries[1] = withoutSession as AuditEntry;
    await store.insert(entries, entries.map((e) => Buffer.from(JSON.stringify({ ...e, traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' }))));
    const { entries: read } = await store.query({ agentIds: [agentId] }, { limit: 500, offset: 0 });
    const byId = new Map(read.map((e) => [e.id, e]));
    expect(byId.get(entries[0]!.id)).toEqual(entries[0]);
    expect(byId.get(entries[1]!.id)).toEqual(entries[1]);
    expect(byId.get(entries[2]!.id)).toEqual({ ...entries[2], timestamp: '2026-10-09T10:00:00.002Z' });
  });

  it.each([['audit_entries', 'audit_ingest_entries_mv'], ['audit_open', 'audit_ingest_open_mv']])('every column of %s is written by %s', async (table, view) => {
    const session = new Session(join(dir.path, 'audit'));
    try {
      const columnsOf = (name: string) => session.query(`SELECT name FROM system.columns WHERE database = 'portcullis' AND table = '${name}' ORDER BY name`, 'TSVRaw').trim().split('\n');
      // A column the view does not name would be written with its default: add it to audit_ingest and both views.
      expect(columnsOf(view)).toEqual(columnsOf(table));
    } finally {
      session.close();
    }
  });
});

describe('write-ahead records', () => {
  it('a call\'s complete record replaces its decision record, whichever is written last', async () => {
    const agentId = 'agent-write-ahead';
    const at = (i: number) => new Date(Date.UTC(2026, 9, 8) + i).toISOString();
    const decided = [0, 1, 2].map((i) => makeEntry({ agentId, timestamp: at(i), stage: 'decision', reason: 'No forbid policy matched; outcome not recorded', durationMs: 1 }));
    const completed = decided.map((d) => ({ ...d, stage: 'complete' as const, reason: 'No forbid policy matched', durationMs: 40 }));
    const orphan = makeEntry({ agentId, timestamp: at(3), stage: 'decision', reason: 'No forbid policy matched; outcome not recorded' });
    await store.insert([...decided, orphan]);
    await store.insert(completed);
    await store.insert(decided.slice(0, 2)); // redelivered after their completion

    const { entries, total } = await store.query({ agentIds: [agentId] }, { limit: 500, offset: 0 });
    expect(total).toBe(4);
    const byId = new Map(entries.map((e) => [e.id, e]));
    for (const c of completed) expect(byId.get(c.id)).toEqual({ ...c, stage: undefined });
    expect(byId.get(orphan.id)).toMatchObject({ stage: 'decision', reason: orphan.reason });

    const streamed: AuditEntry[] = [];
    for await (const batch of store.stream({ agentIds: [agentId] }, { limit: 0, offset: 0 })) streamed.push(...batch);
    expect(streamed.map((e) => e.reason).sort()).toEqual([...completed.map((c) => c.reason), orphan.reason].sort());
  });
});

describe('open write-ahead records (decision 035)', () => {
  const rowsIn = async (table: 'audit_entries' | 'audit_open', agentId: string) => {
    const session = new Session(join(dir.path, 'audit'));
    try {
      return Number(session.query(`SELECT count() FROM portcullis.${table} WHERE agent_id = '${agentId}'`, 'TSV').trim());
    } finally {
      session.close();
    }
  };

  it('keeps a decision record out of the main table: one row per entry, the open one tidied away once closed', async () => {
    const agentId = 'agent-open-1';
    const decided = makeEntry({ agentId, timestamp: new Date().toISOString(), stage: 'decision', reason: 'No forbid policy matched; outcome not recorded' });
    const paired = makeEntry({ agentId, timestamp: new Date().toISOString(), stage: 'decision' });
    await store.insert([decided, paired, { ...paired, stage: 'complete' }]);
    expect([await rowsIn('audit_entries', agentId), await rowsIn('audit_open', agentId)]).toEqual([1, 1]);
    expect((await store.query({ agentIds: [agentId] }, { limit: 10, offset: 0 })).total).toBe(2);

    await store.insert([{ ...decided, stage: 'complete', reason: 'No forbid policy matched' }]);
    const { entries, total } = await store.query({ agentIds: [agentId] }, { limit: 10, offset: 0 });
    expect(total).toBe(2);
    expect(entries.every((e) => e.stage === undefined)).toBe(true);
    await store.tidyOpenRecords({});
    expect([await rowsIn('audit_entries', agentId), await rowsIn('audit_open', agentId)]).toEqual([2, 0]);
  });

  it('settles an orphan into the main table once old enough, and a late completion still replaces it', async () => {
    const agentId = 'agent-open-2';
    const hourAgo = new Date(Date.now() - 3_600_000).toISOString();
    const orphan = makeEntry({ agentId, timestamp: hourAgo, stage: 'decision', reason: 'No forbid policy matched; outcome not recorded' });
    const young = makeEntry({ agentId, timestamp: new Date().toISOString(), stage: 'decision' });
    await store.insert([orphan, young]);
    // The audit sinks are handed exactly what was settled (decision 055).
    const mine = (settled: AuditEntry[]) => settled.filter((e) => e.agentId === agentId);
    expect(mine(await store.tidyOpenRecords({ settleBefore: new Date(Date.now() - 600_000), returnSettled: true }))).toEqual([orphan]);
    expect([await rowsIn('audit_entries', agentId), await rowsIn('audit_open', agentId)]).toEqual([1, 1]);
    let read = await store.query({ agentIds: [agentId] }, { limit: 10, offset: 0 });
    expect(read.total).toBe(2);
    expect(read.entries.find((e) => e.id === orphan.id)).toEqual(orphan);

    // Settled again (a run cut short is repeated): nothing doubles, nothing is handed on twice.
    expect(mine(await store.tidyOpenRecords({ settleBefore: new Date(Date.now() - 600_000), returnSettled: true }))).toEqual([]);
    const completion = { ...orphan, stage: 'complete' as const, reason: 'No forbid policy matched' };
    await store.insert([completion]);
    read = await store.query({ agentIds: [agentId] }, { limit: 10, offset: 0 });
    expect(read.total).toBe(2);
    expect(read.entries.find((e) => e.id === orphan.id)).toEqual({ ...completion, stage: undefined });
    expect(await rowsIn('audit_entries', agentId)).toBe(1);
  });
});

describe('filters resolved before the read', () => {
  it('finds an agent by the name its entries were recorded with and by its current name', async () => {
    expect(names((await store.query(wire({ agent: 'devops' }), { limit: 10, offset: 0 })).entries)).toEqual(['e4', 'e3']);
    // Renamed since: the caller names the agents whose current name matches.
    const renamed = parseFilter({ agentIds: visible, from: '', to: '', agent: 'renamed bot', service: '', tool: '', result: '', member: '', policy: '', agentIdsByCurrentName: [A2] });
    expect(names((await store.query(renamed, { limit: 10, offset: 0 })).entries)).toEqual(['e4', 'e3']);
    // A current name outside the caller's agents opens nothing.
    const outside = parseFilter({ agentIds: [A1], from: '', to: '', agent: 'renamed bot', service: '', tool: '', result: '', member: '', policy: '', agentIdsByCurrentName: [A2] });
    expect((await store.query(outside, { limit: 10, offset: 0 })).total).toBe(0);
  });

  it('turns a tool substring into the tool names it matches, and a substring matching none into no rows', async () => {
    expect(await store.resolveFilter(wire({ tool: 'ISSUE' }))).toMatchObject({ tools: expect.arrayContaining(['create_issue', 'list_issues']) });
    expect(await store.resolveFilter(wire({ tool: 'no-such-tool' }))).toBeUndefined();
    expect((await store.query(wire({ tool: 'no-such-tool' }), { limit: 10, offset: 0 })).total).toBe(0);
  });
});

describe('newest-first pages over a long range', () => {
  it('pages in order whether the page lies in the newest day or months back', async () => {
    const agentId = 'agent-walk';
    const day = 86_400_000;
    // 3 entries a day for the newest 2 days, then one every 10 days back over 200 days.
    const times = [...[0, 1].flatMap((d) => [0, 1, 2].map((h) => Date.UTC(2026, 9, 30) - d * day - h * 3_600_000)),
      ...Array.from({ length: 20 }, (_, i) => Date.UTC(2026, 9, 28) - i * 10 * day)];
    const entries = times.map((t) => makeEntry({ agentId, timestamp: new Date(t).toISOString() }));
    await store.insert(entries);
    const newestFirst = [...entries].sort((a, b) => b.timestamp.localeCompare(a.timestamp)).map((e) => e.id);
    for (const page of [{ limit: 2, offset: 0 }, { limit: 4, offset: 4 }, { limit: 5, offset: 18 }, { limit: 500, offset: 0 }]) {
      const read = await store.query({ agentIds: [agentId] }, page);
      expect(read.total).toBe(26);
      expect(read.entries.map((e) => e.id)).toEqual(newestFirst.slice(page.offset, page.offset + page.limit));
    }
    const bounded = await store.query({ agentIds: [agentId], to: new Date(Date.UTC(2026, 6, 1)) }, { limit: 3, offset: 1 });
    expect(bounded.entries.map((e) => e.id)).toEqual(newestFirst.filter((id) => Date.parse(entries.find((e) => e.id === id)!.timestamp) <= Date.UTC(2026, 6, 1)).slice(1, 4));
  });
});

describe('stream (export read)', () => {
  it('yields every match in the list\'s order (newest first, decision 071), applying the filter', async () => {
    const ids: string[] = [];
    for await (const batch of store.stream(wire({}), { limit: 0, offset: 0 })) ids.push(...names(batch));
    expect(ids).toEqual(['e5', 'e4', 'e3', 'e2', 'e1']);
  });

  it('honours limit and offset', async () => {
    const ids: string[] = [];
    for await (const batch of store.stream(wire({}), { limit: 2, offset: 1 })) ids.push(...names(batch));
    expect(ids).toEqual(['e4', 'e3']);
  });

  it('offset without limit skips and returns the rest', async () => {
    const ids: string[] = [];
    for await (const batch of store.stream(wire({ result: 'DENY' }), { limit: 0, offset: 1 })) ids.push(...names(batch));
    expect(ids).toEqual(['e2']);
  });

  it('yields nothing for no agents', async () => {
    const batches: unknown[] = [];
    for await (const batch of store.stream({ agentIds: [] }, { limit: 0, offset: 0 })) batches.push(batch);
    expect(batches).toEqual([]);
  });

  it('can be left early, and the store keeps working', async () => {
    for await (const batch of store.stream({ agentIds: [BULK] }, { limit: 0, offset: 0 })) {
      expect(batch.length).toBeGreaterThan(0);
      break;
    }
    const ids: string[] = [];
    for await (const batch of store.stream(wire({ agent: 'support' }), { limit: 0, offset: 0 })) ids.push(...names(batch));
    expect(ids).toEqual(['e5', 'e2', 'e1']);
  });
});

describe('members and stats', () => {
  it('lists each member of the given agents once, by name', async () => {
    expect(await store.members(visible)).toEqual([
      { memberId: M2, memberName: 'li@example.com' },
      { memberId: M1, memberName: 'maria@example.com' },
      { memberId: M3, memberName: 'sam@example.com' },
    ]);
    expect(await store.members([])).toEqual([]);
  });

  it('counts calls, allowed and denied in an inclusive range', async () => {
    expect(await store.stats({ agentIds: visible })).toEqual({ calls: 5, allowed: 3, denied: 2 });
    expect(await store.stats({ agentIds: visible, from: new Date('2026-10-01T12:00:00.000Z'), to: new Date('2026-10-02T23:59:59.999Z') }))
      .toEqual({ calls: 3, allowed: 1, denied: 2 });
    expect(await store.stats({ agentIds: [] })).toEqual({ calls: 0, allowed: 0, denied: 0 });
  });
});

describe('skipping indexes', () => {
  it.each([
    ['member_id_bloom', `member_id = '${M1}'`],
    ['policy_db_ids_bloom', `has(policy_db_ids, '${P1}')`],
  ])('%s is consulted', async (index, condition) => {
    // A second Session on the same directory shares the store's engine (chDB: one per process).
    const session = new Session(join(dir.path, 'audit'));
    try {
      const plan = session.query(`EXPLAIN indexes = 1 SELECT id FROM portcullis.audit_entries WHERE agent_id IN ('${A1}') AND ${condition}`, 'TSVRaw');
      expect(plan).toContain(`Name: ${index}`);
    } finally {
      session.close();
    }
  });
});

describe('the call-count projection (migration 010)', () => {
  it('answers the count of an agent, service, tool and result filter, and matches the rows', async () => {
    const session = new Session(join(dir.path, 'audit'));
    try {
      const where = `agent_id IN ('${A1}', '${A2}') AND service = 'github' AND tool IN ('create_issue', 'list_issues') AND decision = 'ALLOW'`;
      const plan = session.query(`EXPLAIN SELECT count() FROM portcullis.audit_entries WHERE ${where}`, 'TSVRaw');
      expect(plan).toContain('call_counts');
      const counted = session.query(`SELECT count() FROM portcullis.audit_entries WHERE ${where}`, 'TSVRaw').trim();
      const scanned = session.query(`SELECT count() FROM portcullis.audit_entries WHERE ${where} SETTINGS optimize_use_projections = 0`, 'TSVRaw').trim();
      expect(Number(counted)).toBeGreaterThan(0);
      expect(counted).toBe(scanned);
    } finally {
      session.close();
    }
  });
});

describe('policyTriggers', () => {
  it('counts, per policy id, the agent\'s entries that matched it, and the newest one\'s time', async () => {
    expect(await store.policyTriggers(A2, [P1, P2])).toEqual([
      { policyDbId: P1, count: 1, lastTriggered: '2026-10-02T23:59:59.999Z' },
      { policyDbId: P2, count: 1, lastTriggered: '2026-10-02T23:59:59.999Z' },
    ]);
    // e6 (agent A3) also matched P1; it is another agent's entry, so it does not count for A1.
    expect(await store.policyTriggers(A1, [P1, P2])).toEqual([{ policyDbId: P1, count: 1, lastTriggered: '2026-10-01T12:00:00.000Z' }]);
  });

  it('leaves out ids never matched, answers nothing for no ids, and counts a redelivered entry once', async () => {
    expect(await store.policyTriggers(A1, [])).toEqual([]);
    expect(await store.policyTriggers(A1, ['0195f0a0-0000-7000-8000-0000000000ff'])).toEqual([]);
    const P3 = '0195f0a0-0000-7000-8000-0000000000f3';
    const entries = [0, 1, 2].map((i) => makeEntry({ agentId: 'agent-triggers', timestamp: `2026-10-0${i + 4}T00:00:00.000Z`, decision: 'DENY', policyDbIds: [P3] }));
    await store.insert(entries);
    await store.insert(entries.slice(1));
    expect(await store.policyTriggers('agent-triggers', [P3, P3])).toEqual([{ policyDbId: P3, count: 3, lastTriggered: '2026-10-06T00:00:00.000Z' }]);
  });
});
