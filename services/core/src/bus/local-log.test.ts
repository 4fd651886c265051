import { mkdtempSync, readdirSync, rmSync, statSync, appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { uuidv7 } from 'uuidv7';
import type { AuditEntry } from '../audit-entry.ts';
import { frameRecord, openLocalLog } from './local-log.ts';
import { createAuditJournal, openDurableMemoryBus } from './durable-memory-bus.ts';

const dirs: string[] = [];
const tempDir = () => { const dir = mkdtempSync(join(tmpdir(), 'pc-local-log-')); dirs.push(dir); return dir; };
afterEach(() => { for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true }); });

const segments = (dir: string) => readdirSync(dir).filter((n) => n.endsWith('.log')).sort();

const entry = (over: Partial<AuditEntry> = {}): AuditEntry => ({
  id: uuidv7(), timestamp: new Date().toISOString(), agentId: 'a', agentName: 'A', memberId: 'm', memberName: 'm@x', memberKeyId: 'k',
  service: 'linear', tool: 'list_issues', action: 'LinearMCP::Action::"list_issues"', resource: 'LinearMCP::Workspace::"w"', callerIp: '127.0.0.1',
  toolArgs: {}, decision: 'ALLOW', reason: 'No forbid policy matched', matchedPolicyIds: [], matchedPolicyNames: [], policyVersionIds: [], policyDbIds: [],
  durationMs: 1, principal: 'Portcullis::Member::"m"', ...over,
});

/** Everything the bus hands its writer, until it has `count` entries. */
async function stored(bus: ReturnType<typeof openDurableMemoryBus>, count: number): Promise<AuditEntry[]> {
  const got: AuditEntry[] = [];
  const consumer = await bus.consumeAudit({ batchSize: 100, maxWaitMs: 5, handle: async (batch) => { got.push(...batch); } });
  for (let i = 0; got.length < count && i < 200; i++) await new Promise((r) => setTimeout(r, 10));
  await consumer.drain();
  return got;
}

describe('local log (decision 070)', () => {
  it('replays the complete records after a crash mid-write and drops the torn last one', async () => {
    const dir = tempDir();
    const log = openLocalLog({ dir });
    const appended = [1, 2, 3, 4].map((n) => log.append({ n, text: 'x'.repeat(n * 10) }));
    await Promise.all(appended.map((a) => a.durable));
    const [file] = segments(dir);
    // The process dies in the middle of writing a fifth record: half of its frame reached the file.
    const torn = frameRecord({ n: 5, text: 'y'.repeat(50) });
    appendFileSync(join(dir, file!), torn.subarray(0, torn.length - 20));
    // (no close: the process is gone)

    const reopened = openLocalLog({ dir });
    expect(reopened.recovered).toEqual([{ segment: 1, records: [1, 2, 3, 4].map((n) => ({ n, text: 'x'.repeat(n * 10) })) }]);
    expect(reopened.problems).toHaveLength(1);
    expect(reopened.problems[0]).toMatch(/torn record/);
    // New records go to a fresh segment; the old file is never appended to.
    await reopened.append({ n: 6 }).durable;
    expect(reopened.activeSegment).toBe(2);
    await reopened.close();
    expect(segments(dir)).toEqual(['0000000001.log', '0000000002.log']);
  });

  it('drops a last record whose checksum fails, and stops at a corrupt record in the middle of a file', async () => {
    const dir = tempDir();
    const log = openLocalLog({ dir });
    for (const n of [1, 2, 3]) log.append({ n });
    await log.close();
    const path = join(dir, segments(dir)[0]!);
    const bytes = readFileSync(path);
    const frame = frameRecord({ n: 1 }).length;
    // A header whose length is intact but whose payload changed: the last record, then the second.
    const lastFlipped = Buffer.from(bytes);
    lastFlipped[lastFlipped.length - 2] = lastFlipped[lastFlipped.length - 2]! ^ 0xff;
    writeFileSync(path, lastFlipped);
    expect(openLocalLog({ dir }).recovered[0]!.records).toEqual([{ n: 1 }, { n: 2 }]);
    const middleFlipped = Buffer.from(bytes);
    middleFlipped[frame + 9] = middleFlipped[frame + 9]! ^ 0xff;
    writeFileSync(path, middleFlipped);
    const reopened = openLocalLog({ dir });
    expect(reopened.recovered[0]!.records).toEqual([{ n: 1 }]);
    expect(reopened.problems[0]).toMatch(/checksum mismatch .* middle of the file/);
    // A file extended with zeros (a machine crash after the size, before the data) reads as torn too.
    writeFileSync(path, Buffer.concat([bytes, Buffer.alloc(64)]));
    expect(openLocalLog({ dir }).recovered.find((s) => s.segment === 1)!.records).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
  });

  it('group commit: records appended together share one write and one fdatasync; those arriving during a sync share the next', async () => {
    const dir = tempDir();
    const log = openLocalLog({ dir });
    const first = Array.from({ length: 50 }, (_, n) => log.append({ n }));
    await Promise.all(first.map((a) => a.durable));
    expect(log.writes).toBe(1);
    expect(log.syncs).toBe(1);

    // 200 records in 20 turns of the event loop, while earlier syncs are still running: far fewer syncs than records.
    const more: Array<Promise<void>> = [];
    for (let turn = 0; turn < 20; turn++) {
      for (let n = 0; n < 10; n++) more.push(log.append({ turn, n }).durable);
      await new Promise((r) => setImmediate(r));
    }
    await Promise.all(more);
    expect(log.syncs - 1).toBeLessThanOrEqual(20);
    expect(log.writes - 1).toBeLessThanOrEqual(20);
    await log.close();
    expect(openLocalLog({ dir }).recovered[0]!.records).toHaveLength(250);
  });

  it('a record nobody waits on rides on the next sync someone needs, or one within lazySyncMs', async () => {
    const dir = tempDir();
    const log = openLocalLog({ dir, lazySyncMs: 200 });
    const completion = log.append({ n: 1 }, 'soon');
    await completion.written;
    await new Promise((r) => setTimeout(r, 20));
    expect(log.syncs).toBe(0);
    // A record someone waits for: one sync covers both.
    const intent = log.append({ n: 2 });
    await Promise.all([intent.durable, completion.durable]);
    expect(log.syncs).toBe(1);
    // Alone, it is synced within lazySyncMs.
    const started = Date.now();
    await log.append({ n: 3 }, 'soon').durable;
    expect(log.syncs).toBe(2);
    expect(Date.now() - started).toBeGreaterThanOrEqual(150);
    await log.close();
  });

  it('refuses the records of a failed write and writes the next ones to a new segment', async () => {
    const dir = tempDir();
    const failures: unknown[] = [];
    const log = openLocalLog({ dir, onFailure: (err) => failures.push(err) });
    // Something else took the name of the segment about to be created: its open fails.
    writeFileSync(join(dir, '0000000001.log'), '');
    const refused = log.append({ n: 1 });
    await expect(refused.written).rejects.toThrow(/EEXIST/);
    await expect(refused.durable).rejects.toThrow(/EEXIST/);
    expect(failures).toHaveLength(1);
    await log.append({ n: 2 }).durable;
    expect(log.activeSegment).toBe(2);
    await log.close();
    expect(openLocalLog({ dir }).recovered).toEqual([{ segment: 1, records: [] }, { segment: 2, records: [{ n: 2 }] }]);
  });

  it('starts a new segment past its size and deletes a segment only once the writer stored everything in it', async () => {
    const dir = tempDir();
    const bus = openDurableMemoryBus({ dir, segmentBytes: 2_000, report: () => undefined });
    const entries = Array.from({ length: 12 }, () => entry());
    for (const e of entries) await bus.publishAudit(e);
    expect(segments(dir).length).toBeGreaterThan(2);
    // Nothing stored yet: a crash now replays every entry.
    const got = await stored(bus, entries.length);
    expect(got.map((e) => e.id)).toEqual(entries.map((e) => e.id));
    await new Promise((r) => setTimeout(r, 20));
    // Stored: every segment but the active one is gone; a clean stop removes that one too.
    expect(segments(dir)).toHaveLength(1);
    await bus.close();
    expect(segments(dir)).toEqual([]);
  });
});

describe('in-process bus over the local log: a crash (decision 070)', () => {
  it('replays what was accepted and not stored, once, and an intent with no record as the entry it carries', async () => {
    const dir = tempDir();
    const crashed = openDurableMemoryBus({ dir, report: () => undefined });
    const storedBefore = entry();
    await crashed.publishAudit(storedBefore);
    const got = await stored(crashed, 1);
    expect(got.map((e) => e.id)).toEqual([storedBefore.id]);

    // An allowed call: intent, then its write-ahead record (accepted once written: the intent is durable).
    const allowed = entry();
    await crashed.intendAudit!(entry({ id: allowed.id, decision: 'DENY', reason: 'not decided' }));
    await crashed.publishAudit({ ...allowed, stage: 'decision' });
    // A call whose verdict never reached the log.
    const undecided = entry({ decision: 'DENY', reason: 'Not forwarded: the process stopped before its verdict was recorded' });
    await crashed.intendAudit!(undecided);
    // A denied call, answered.
    const denied = entry({ decision: 'DENY', reason: 'forbidden' });
    await crashed.publishAudit(denied);
    // Give the write-ahead record's own sync time (it was accepted as written): then the process dies, with no close.
    await new Promise((r) => setTimeout(r, 50));

    const logs: string[] = [];
    const restarted = openDurableMemoryBus({ dir, report: (m) => logs.push(m) });
    const replayed = await stored(restarted, 4);
    expect(replayed.map((e) => [e.id, e.stage, e.decision, e.reason])).toEqual([
      // Still in the segment being written when the process died: replayed, and left out by the store that holds it.
      [storedBefore.id, undefined, 'ALLOW', storedBefore.reason],
      [allowed.id, 'decision', 'ALLOW', allowed.reason],
      [denied.id, undefined, 'DENY', 'forbidden'],
      [undecided.id, undefined, 'DENY', undecided.reason],
    ]);
    expect(logs.some((m) => /replaying 4/.test(m))).toBe(true);
    await restarted.close();
    expect(segments(dir)).toEqual([]);
  });

  it('a call waits for writes, never for a sync: one group sync in the background covers its records within lazySyncMs', async () => {
    const dir = tempDir();
    const log = openLocalLog({ dir, lazySyncMs: 50 });
    const journal = createAuditJournal(log, () => undefined);
    const call = entry();
    // The gateway starts the intent, then awaits the verdict; the write runs meanwhile.
    await journal.intend(entry({ id: call.id, decision: 'DENY', reason: 'not decided' }));
    await journal.append({ ...call, stage: 'decision' });
    // A record of a call with no intent (a denied call's entry) is accepted on its write too.
    await journal.append(entry({ decision: 'DENY' }));
    // Accepted once written (they survive the process): nothing has waited for the disk.
    expect(log.writes).toBe(3);
    expect(log.syncs).toBe(0);
    // The sync that makes them survive the machine follows on its own, one for the group.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(log.syncs).toBe(1);
    await journal.close();
  });

  it('keeps every accepted entry when the process dies mid-write: a torn tail drops only the unaccepted record', async () => {
    const dir = tempDir();
    const bus = openDurableMemoryBus({ dir, report: () => undefined });
    const accepted = Array.from({ length: 5 }, () => entry());
    for (const e of accepted) await bus.publishAudit(e);
    const [file] = segments(dir);
    const size = statSync(join(dir, file!)).size;
    appendFileSync(join(dir, file!), frameRecord({ entry: entry() }).subarray(0, 30));
    expect(statSync(join(dir, file!)).size).toBe(size + 30);

    const restarted = openDurableMemoryBus({ dir, report: () => undefined });
    const replayed = await stored(restarted, 5);
    expect(replayed.map((e) => e.id)).toEqual(accepted.map((e) => e.id));
    await restarted.close();
  });
});
