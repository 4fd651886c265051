import { join } from 'node:path';
import { Session } from 'chdb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redactPolicyIdentities, type AuditEntry } from '@portcullis/core';
import { csvLine, ndjsonLine } from '../handlers/export-format.ts';
import { makeEntry, makeTempDir } from '../testing/audit-entries.ts';
import type { AuditFilter } from './audit-filter.ts';
import { openAuditStore, type AuditStore, type ExportOptions } from './audit-store.ts';

/**
 * The engine formats exports (`export-lines.ts`); these tests hold its bytes to the JS
 * reference formatter (`handlers/export-format.ts`), and check order and paging.
 */
const dir = makeTempDir('export-lines');
let store: AuditStore;

const AWK = 'agent-awkward';

/** Values that need quoting, the formula guard, escaping in JSON, or none of it. */
const awkward: AuditEntry[] = [
  makeEntry({
    agentId: AWK, agentName: 'Ops, "prod"', memberName: 'Maria "M" García', timestamp: '2026-10-01T10:00:00.000Z',
    tool: 'delete_repo', service: 'github', resource: 'GithubMCP::Repository::"acme/api"', decision: 'DENY',
    reason: 'Blocked after hours,\nask an owner', durationMs: 41.5, matchedPolicyIds: ['night-forbid', 'repo-guard'],
    matchedPolicyNames: ['Night forbid', 'Repo guard'], policyDbIds: ['pol-1', 'pol-2'], policyVersionIds: ['ver-1', 'ver-2'],
    toolArgs: { path: 'a/b\\c', note: 'say "hi"\r\n', nested: { list: [1, 2.5, null, true], empty: {} }, unicode: 'Ünïcødé ✓ 🚀' },
  }),
  makeEntry({ agentId: AWK, timestamp: '2026-10-01T10:00:01.000Z', agentName: '=HYPERLINK("http://evil.example","x")', memberName: '+1 555 0100', reason: '-2+3', tool: '@SUM(A1)', durationMs: 0.1 + 0.2 }),
  makeEntry({ agentId: AWK, timestamp: '2026-10-01T10:00:02.000Z', reason: '\tTabbed', resource: '\rCarriage', memberName: '', durationMs: 3, matchedPolicyIds: ['=cmd|calc'] }),
  makeEntry({ agentId: AWK, timestamp: '2026-10-01T10:00:03.000Z', reason: 'a\r\nb "c", d', service: 'sl,ack', tool: 'post"message', agentName: 'Line\r\nBreak\nAgent', toolArgs: {} }),
  makeEntry({ agentId: AWK, timestamp: '2026-10-01T10:00:04.000Z', reason: 'not -a formula; O\'Brien', matchedPolicyIds: ['a', 'b', 'c'], durationMs: 1234567.125 }),
  // Reasons that name a policy (decision 022): a redacted export drops the name, as `reasonWithoutPolicyNames` does.
  makeEntry({ agentId: AWK, timestamp: '2026-10-01T10:00:04.100Z', decision: 'DENY', reason: 'Denied by policy "say \\"no\\", \\\\ O\'Brien"', matchedPolicyIds: ['k'], matchedPolicyNames: ['say "no", \\ O\'Brien'] }),
  makeEntry({ agentId: AWK, timestamp: '2026-10-01T10:00:04.200Z', reason: 'Allowed by policy "Read, only"; upstream error: 503, "busy"', matchedPolicyIds: ['read-only'] }),
  makeEntry({ agentId: AWK, timestamp: '2026-10-01T10:00:04.300Z', decision: 'DENY', reason: 'Denied: policy "Guard" could not be evaluated: in policy guard,\nunknown "attr"' }),
  makeEntry({ agentId: AWK, timestamp: '2026-10-01T10:00:04.400Z', decision: 'DENY', reason: 'Ask the owner, not "Guard"' }),
];
const noSession = (() => {
  const { sessionId: _omit, ...entry } = makeEntry({ agentId: AWK, timestamp: '2026-10-01T10:00:05.000Z' });
  return entry as AuditEntry;
})();
/** A write-ahead `decision` row whose completion has not arrived: `stage` shows, as in a Query. */
const pending = makeEntry({ agentId: AWK, timestamp: '2026-10-01T10:00:06.000Z', stage: 'decision' });
const allAwkward = [...awkward, noSession, pending];
/** The export's order, as the list's: newest first (issue 30, decision 071). */
const newestFirst = (entries: readonly AuditEntry[]) =>
  [...entries].sort((x, y) => (x.timestamp === y.timestamp ? (x.id < y.id ? 1 : -1) : x.timestamp < y.timestamp ? 1 : -1));
const exported = newestFirst(allAwkward);

async function exportText(filter: AuditFilter, options: Partial<ExportOptions> = {}, page = { limit: 0, offset: 0 }): Promise<string> {
  const parts: Buffer[] = [];
  for await (const chunk of store.exportLines(filter, page, { format: 'csv', redactPolicyAgentIds: [], ...options })) parts.push(Buffer.from(chunk));
  return Buffer.concat(parts).toString('utf8');
}

beforeAll(async () => {
  store = await openAuditStore({ target: { kind: 'chdb', path: join(dir.path, 'audit') }, database: 'portcullis' });
  await store.insert(allAwkward);
});

afterAll(async () => {
  await store?.close();
  dir.remove();
});

describe('CSV lines', () => {
  it('are byte for byte the reference formatter\'s records: RFC 4180 quoting, CRLF, formula guard, no callerIp', async () => {
    const text = await exportText({ agentIds: [AWK] });
    expect(text).toBe(exported.map(csvLine).join(''));
    expect(text).not.toContain('203.0.113.7');
    // The guard, spelled out once: a leading ' inside the (quoted where needed) cell.
    expect(text).toContain(`,"'=HYPERLINK(""http://evil.example"",""x"")",'+1 555 0100,'@SUM(A1),github,`);
    expect(text).toContain(",'-2+3,0.30000000000000004,\r\n");
    expect(text).toContain(`,"'\rCarriage",ALLOW,'\tTabbed,3,'=cmd|calc\r\n`);
    expect(text).toContain(",not -a formula; O'Brien,1234567.125,a;b;c\r\n");
  });

  it('empty the policy keys, and the policy names in reasons, of listed agents only', async () => {
    const text = await exportText({ agentIds: [AWK] }, { redactPolicyAgentIds: [AWK] });
    expect(text).toBe(exported.map((e) => csvLine(redactPolicyIdentities(e))).join(''));
    // Spelled out once: the generated reasons lose the name, an owner's own message stays.
    expect(text).toContain(',DENY,Denied by policy,12.5,\r\n');
    expect(text).toContain(',ALLOW,"Allowed by policy; upstream error: 503, ""busy""",12.5,\r\n');
    expect(text).toContain(',DENY,Denied: a policy could not be evaluated,12.5,\r\n');
    expect(text).toContain(',DENY,"Ask the owner, not ""Guard""",12.5,\r\n');
    for (const secret of ['say', 'Read, only', 'unknown', 'night-forbid']) expect(text).not.toContain(secret);
    expect(await exportText({ agentIds: [AWK] }, { redactPolicyAgentIds: ['agent-other'] })).toBe(exported.map(csvLine).join(''));
  });
});

describe('NDJSON lines', () => {
  it('are byte for byte JSON.stringify of the entries as written (sessionId absent when absent, toolArgs an object)', async () => {
    const text = await exportText({ agentIds: [AWK] }, { format: 'ndjson' });
    expect(text).toBe(exported.map(ndjsonLine).join(''));
    expect(text.trimEnd().split('\n').map((line) => JSON.parse(line) as AuditEntry)).toEqual(exported);
  });

  it('show a write-ahead entry once, as its completion once that arrived', async () => {
    const agentId = 'agent-write-ahead';
    const decided = makeEntry({ agentId, timestamp: '2026-10-03T00:00:00.000Z', stage: 'decision' });
    const { stage: _stage, ...completed } = { ...decided, durationMs: 99 };
    await store.insert([decided]);
    await store.insert([completed]);
    await store.insert([decided]); // a redelivered decision row does not replace the completion
    expect(await exportText({ agentIds: [agentId] }, { format: 'ndjson' })).toBe(ndjsonLine(completed));
  });

  it('empty every policy identity of listed agents', async () => {
    const text = await exportText({ agentIds: [AWK] }, { format: 'ndjson', redactPolicyAgentIds: [AWK] });
    expect(text).toBe(exported.map((e) => ndjsonLine(redactPolicyIdentities(e))).join(''));
    for (const secret of ['night-forbid', 'Night forbid', 'pol-1', 'ver-1']) expect(text).not.toContain(secret);
  });

  it('carry the shadow verdict and its policies (decision 061), their identities emptied for listed agents; CSV keeps the spec\'s columns', async () => {
    const agentId = 'agent-shadow';
    const shadowed = makeEntry({
      agentId, timestamp: '2026-10-04T00:00:00.000Z', shadowDecision: 'DENY', shadowPolicyIds: ['shadow-guard'], shadowPolicyDbIds: ['pol-shadow'],
    });
    const plain = makeEntry({ agentId, timestamp: '2026-10-04T00:00:01.000Z' });
    await store.insert([shadowed, plain]);
    // The store's own read gives the field order the engine writes (`fromRow`).
    const { entries } = await store.query({ agentIds: [agentId] }, { limit: 10, offset: 0 });
    const asRead = entries;
    const text = await exportText({ agentIds: [agentId] }, { format: 'ndjson' });
    expect(text).toBe(asRead.map(ndjsonLine).join(''));
    expect(text.trimEnd().split('\n').map((line) => JSON.parse(line) as AuditEntry)).toEqual([plain, shadowed]);
    const redacted = await exportText({ agentIds: [agentId] }, { format: 'ndjson', redactPolicyAgentIds: [agentId] });
    expect(redacted).toBe(asRead.map((e) => ndjsonLine(redactPolicyIdentities(e))).join(''));
    expect(redacted).toContain('"shadowDecision":"DENY","shadowPolicyIds":[],"shadowPolicyDbIds":[]');
    for (const secret of ['shadow-guard', 'pol-shadow']) expect(redacted).not.toContain(secret);
    expect(await exportText({ agentIds: [agentId] })).toBe([plain, shadowed].map(csvLine).join(''));
  });

  it('carry the approval fields of an approval\'s events (decision 063) in the store\'s order; CSV keeps the spec\'s columns', async () => {
    const agentId = 'agent-approvals';
    const approvalId = '0190f1a2-0000-7000-8000-00000000a063';
    const approved = makeEntry({
      agentId, timestamp: '2026-10-05T00:00:00.000Z', approvalId, approvalEvent: 'approved', approverId: 'user-owner', approverName: 'owner@example.com',
    });
    const executed = makeEntry({ agentId, timestamp: '2026-10-05T00:00:01.000Z', approvalId, approvalEvent: 'executed' });
    const plain = makeEntry({ agentId, timestamp: '2026-10-05T00:00:02.000Z' });
    await store.insert([approved, executed, plain]);
    const { entries } = await store.query({ agentIds: [agentId] }, { limit: 10, offset: 0 });
    const asRead = entries;
    expect(asRead).toEqual([plain, executed, approved]);
    const text = await exportText({ agentIds: [agentId] }, { format: 'ndjson' });
    expect(text).toBe(asRead.map(ndjsonLine).join(''));
    expect(text.trimEnd().split('\n').map((line) => JSON.parse(line) as AuditEntry)).toEqual([plain, executed, approved]);
    expect(await exportText({ agentIds: [agentId] })).toBe([plain, executed, approved].map(csvLine).join(''));
  });

  it('write {} for stored tool arguments that are not a JSON object, as a Query read does', async () => {
    const agentId = 'agent-bad-args';
    const entry = makeEntry({ agentId, timestamp: '2026-10-02T00:00:00.000Z' });
    await store.insert([entry]);
    const session = new Session(join(dir.path, 'audit'));
    try {
      session.query(`ALTER TABLE portcullis.audit_entries UPDATE tool_args = '[1,2]' WHERE agent_id = '${agentId}' SETTINGS mutations_sync = 1`);
    } finally {
      session.close();
    }
    const [line] = (await exportText({ agentIds: [agentId] }, { format: 'ndjson' })).trimEnd().split('\n');
    expect(JSON.parse(line!)).toEqual({ ...entry, toolArgs: {} });
    expect((await store.query({ agentIds: [agentId] }, { limit: 1, offset: 0 })).entries[0]!.toolArgs).toEqual({});
  });
});

describe('order and paging', () => {
  // Three agents over three monthly partitions, written in several unmerged parts, some twice.
  const agents = ['agent-order-b', 'agent-order-a', 'agent-order-c'];
  const spread = agents.flatMap((agentId, a) => Array.from({ length: 30 }, (_, i) =>
    makeEntry({ agentId, agentName: agentId, timestamp: new Date(Date.UTC(2026, 7 + (i % 3), 1 + a, 0, 0, i)).toISOString(), reason: `${agentId}-${i}` })));
  // The list's order, newest first (`timestamp DESC, id DESC`), not the table's (day, agent, time).
  const keyOrder = newestFirst(spread);

  beforeAll(async () => {
    const session = new Session(join(dir.path, 'audit'));
    try {
      session.query('SYSTEM STOP MERGES portcullis.audit_entries');
      for (let i = 0; i < spread.length; i += 7) await store.insert(spread.slice(i, i + 7));
      await store.insert(spread.filter((_, i) => i % 4 === 0)); // redelivered copies
    } finally {
      session.close();
    }
  });

  afterAll(() => {
    const session = new Session(join(dir.path, 'audit'));
    try {
      session.query('SYSTEM START MERGES portcullis.audit_entries');
    } finally {
      session.close();
    }
  });

  const reasons = (text: string) => text.trimEnd().split('\n').map((line) => (JSON.parse(line) as AuditEntry).reason);

  it('come newest first, as the list does, across agents, partitions and unmerged parts, each id once (issue 30)', async () => {
    expect(reasons(await exportText({ agentIds: agents }, { format: 'ndjson' }))).toEqual(keyOrder.map((e) => e.reason));
  });

  it('page with limit and offset over that order: `max=1` is the newest entry, pages are the list\'s pages', async () => {
    expect(reasons(await exportText({ agentIds: agents }, { format: 'ndjson' }, { limit: 1, offset: 0 }))).toEqual([keyOrder[0]!.reason]);
    expect(reasons(await exportText({ agentIds: agents }, { format: 'ndjson' }, { limit: 7, offset: 28 }))).toEqual(keyOrder.slice(28, 35).map((e) => e.reason));
    expect(reasons(await exportText({ agentIds: agents }, { format: 'ndjson' }, { limit: 0, offset: 85 }))).toEqual(keyOrder.slice(85).map((e) => e.reason));
    for (const offset of [0, 7, 28, 84]) {
      const { entries } = await store.query({ agentIds: agents }, { limit: 7, offset });
      expect(reasons(await exportText({ agentIds: agents }, { format: 'ndjson' }, { limit: 7, offset }))).toEqual(entries.map((e) => e.reason));
    }
  });

  it('interleave calls still open (write-ahead records without their completion) by time, as the list does', async () => {
    const agentId = 'agent-order-open';
    const done = [0, 2, 4].map((s) => makeEntry({ agentId, timestamp: new Date(Date.UTC(2026, 9, 20, 0, 0, s)).toISOString(), reason: `done-${s}` }));
    const open = [1, 3].map((s) => makeEntry({ agentId, timestamp: new Date(Date.UTC(2026, 9, 20, 0, 0, s)).toISOString(), reason: `open-${s}`, stage: 'decision' }));
    await store.insert(done);
    await store.insert(open);
    const { entries } = await store.query({ agentIds: [agentId] }, { limit: 10, offset: 0 });
    expect(entries.map((e) => e.reason)).toEqual(['done-4', 'open-3', 'done-2', 'open-1', 'done-0']);
    expect(reasons(await exportText({ agentIds: [agentId] }, { format: 'ndjson' }))).toEqual(entries.map((e) => e.reason));
    expect(reasons(await exportText({ agentIds: [agentId] }, { format: 'ndjson' }, { limit: 2, offset: 1 }))).toEqual(['open-3', 'done-2']);
  });

  it('apply the filter, and bind its values', async () => {
    const from = new Date(Date.UTC(2026, 8, 1)), to = new Date(Date.UTC(2026, 8, 30));
    const expected = keyOrder.filter((e) => e.agentId !== 'agent-order-c' && e.timestamp >= from.toISOString() && e.timestamp <= to.toISOString());
    expect(reasons(await exportText({ agentIds: ['agent-order-a', 'agent-order-b'], from, to }, { format: 'ndjson' }))).toEqual(expected.map((e) => e.reason));
    expect(await exportText({ agentIds: agents, agent: "' OR 1=1 --" })).toBe('');
    expect(await exportText({ agentIds: [] })).toBe('');
  });
});
