import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openAuditStore, type AuditStore } from '../../services/audit/src/store/audit-store.ts';
import { makeEntry } from '../../services/audit/src/testing/audit-entries.ts';
import { startClickHouseFrontProcess } from '../support/clickhouse-front.ts';
import type { RunningProcess } from '../support/processes.ts';

/**
 * The audit store's `CLICKHOUSE_URL` path (`@clickhouse/client` over HTTP), end to end,
 * against the test-only HTTP front over chDB (test/support/clickhouse-front.ts): the same SQL
 * module the embedded path runs, through the real HTTP client, with two stores (as two audit
 * writers would) on one ClickHouse.
 */
describe('audit store over ClickHouse\'s HTTP interface (two clients, one store)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'pc-chfront-'));
  let front: RunningProcess;
  let writer: AuditStore;
  let reader: AuditStore;
  const A = 'agent-http';
  const at = (i: number) => new Date(Date.UTC(2026, 9, 5) + i * 1000).toISOString();
  const entries = Array.from({ length: 30 }, (_, i) => makeEntry({
    agentId: A, agentName: 'Over HTTP', timestamp: at(i), decision: i % 3 === 0 ? 'DENY' : 'ALLOW',
    sessionId: i < 10 ? 'sess-1' : 'sess-2', tool: i % 2 ? 'list_issues' : 'create_issue',
    policyDbIds: i % 3 === 0 ? ['pol-1'] : [], matchedPolicyIds: i % 3 === 0 ? ['no-creates'] : [], matchedPolicyNames: i % 3 === 0 ? ['No creates'] : [],
    reason: i === 4 ? '=HYPERLINK("x")' : 'No forbid policy matched',
  }));

  beforeAll(async () => {
    const started = await startClickHouseFrontProcess(join(dir, 'ch'));
    front = started.process;
    const target = { kind: 'server', url: started.url } as const;
    // Two processes starting at once on a fresh store: the migration lock makes them take turns.
    [writer, reader] = await Promise.all([
      openAuditStore({ target, database: 'portcullis', retentionDays: null }),
      openAuditStore({ target, database: 'portcullis' }),
    ]);
  });
  afterAll(async () => {
    await writer?.close();
    await reader?.close();
    await front?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('migrates once though two clients opened the fresh store together', async () => {
    expect(await writer.migrate()).toEqual([]);
    expect(await reader.migrate()).toEqual([]);
  });

  it('migrates, inserts (twice: redelivery), and another client reads each entry once with every filter', async () => {
    await writer.insert(entries);
    await writer.insert(entries.slice(0, 12));
    const all = await reader.query({ agentIds: [A] }, { limit: 500, offset: 0 });
    expect(all.total).toBe(30);
    expect(all.entries.map((e) => e.id)).toEqual(entries.map((e) => e.id).reverse());
    expect(all.entries.at(-1)).toEqual(entries[0]);
    expect((await reader.query({ agentIds: [A], result: 'DENY' }, { limit: 500, offset: 0 })).total).toBe(10);
    expect((await reader.query({ agentIds: [A], policy: 'pol-1' }, { limit: 500, offset: 0 })).total).toBe(10);
    expect((await reader.query({ agentIds: [A], policy: 'no-creates' }, { limit: 500, offset: 0 })).total).toBe(0);
    expect((await reader.query({ agentIds: [A], tool: 'ISSUES' }, { limit: 500, offset: 0 })).total).toBe(15);
    expect((await reader.query({ agentIds: [A], from: new Date(at(10)), to: new Date(at(19)) }, { limit: 500, offset: 0 })).total).toBe(10);
    expect((await reader.query({ agentIds: [A], agent: "' OR 1=1 --" }, { limit: 500, offset: 0 })).total).toBe(0);
  });

  it('a batch of 1,000 entries redelivered whole is stored once (its probe binds ~40 kB of ids in the URL)', async () => {
    const agentId = 'agent-http-bulk';
    const bulk = Array.from({ length: 1_000 }, (_, i) => makeEntry({ agentId, timestamp: new Date(Date.UTC(2026, 9, 6) + i).toISOString() }));
    await writer.insert(bulk);
    await writer.insert(bulk);
    expect((await reader.query({ agentIds: [agentId] }, { limit: 1, offset: 0 })).total).toBe(1_000);
  });

  it('counts stats, member stats, policy triggers and a session\'s activity', async () => {
    expect(await reader.stats({ agentIds: [A] })).toEqual({ calls: 30, allowed: 20, denied: 10 });
    expect((await reader.memberStats({ agentIds: [A] }))[0]).toMatchObject({ calls: 30, allowed: 20, denied: 10 });
    expect(await reader.policyTriggers(A, ['pol-1', 'pol-x'])).toEqual([{ policyDbId: 'pol-1', count: 10, lastTriggered: entries[27]!.timestamp }]);
    const activity = await reader.sessionActivity(A, 'sess-1');
    expect(activity).toMatchObject({ calls: 10, allowed: 6, denied: 4, firstCallAt: entries[0]!.timestamp, lastCallAt: entries[9]!.timestamp });
    expect(activity.policies).toEqual([{ policyDbId: 'pol-1', policyKey: 'no-creates', policyName: 'No creates', hits: 4 }]);
  });

  it('answers the histogram and the home overview over HTTP, adding up to the query\'s total (decision 037)', async () => {
    const histogram = await reader.histogram({ agentIds: [A], from: new Date(at(0)), to: new Date(at(59)) });
    expect(histogram.bucketSeconds).toBe(60);
    expect(histogram.buckets).toEqual([{ start: at(0), calls: 30, denies: 10 }]);
    const unbounded = await reader.histogram({ agentIds: [A], tool: 'ISSUES' });
    expect(unbounded.buckets.reduce((n, b) => n + b.calls, 0)).toBe(15);
    const overview = await reader.overview({ agentIds: [A], policyAgentIds: [A], top: 5 });
    expect({ calls: overview.calls, denies: overview.denies }).toEqual({ calls: 30, denies: 10 });
    expect(overview.topDeniedPolicies).toEqual([{ policyDbId: 'pol-1', policyKey: 'no-creates', policyName: 'No creates', agentId: A, denies: 10 }]);
    expect(overview.topDeniedTools).toEqual([{ service: 'github', tool: 'create_issue', denies: 5 }, { service: 'github', tool: 'list_issues', denies: 5 }]);
    expect(overview.memberDenyRates).toEqual([{ memberId: entries[0]!.memberId, memberName: entries[0]!.memberName, agentId: A, calls: 30, denies: 10 }]);
  });

  it('exports CSV formatted by the engine over HTTP, newest first as the list (decision 071), formula cells guarded', async () => {
    const chunks: Buffer[] = [];
    for await (const chunk of reader.exportLines({ agentIds: [A] }, { limit: 0, offset: 0 }, { format: 'csv', redactPolicyAgentIds: [] })) chunks.push(Buffer.from(chunk));
    const lines = Buffer.concat(chunks).toString('utf8').split('\r\n').filter(Boolean);
    expect(lines).toHaveLength(30);
    expect(lines[25]).toContain(`'=HYPERLINK`);
    expect(lines[0]!.startsWith(entries[29]!.timestamp)).toBe(true);
    expect(lines.join('\n')).not.toContain('203.0.113.7'); // callerIp is never a column
  });

  it('sets and removes a retention TTL', async () => {
    await writer.setRetention(90);
    await writer.setRetention(null);
    expect((await reader.query({ agentIds: [A] }, { limit: 1, offset: 0 })).total).toBe(30);
  });
});
