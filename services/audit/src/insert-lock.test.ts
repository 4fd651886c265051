import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryBus, createNatsBus, type Bus } from '@portcullis/core';
import { TEST_NATS_URL, uniqueSubjectPrefix } from '@portcullis/core/testing';
import { createInsertLock } from './insert-lock.ts';
import { openAuditStore } from './store/audit-store.ts';
import { makeEntry, makeTempDir } from './testing/audit-entries.ts';

let nats: Bus;
let other: Bus;
const prefix = uniqueSubjectPrefix('insert_lock');
beforeAll(async () => {
  // Two connections, as two audit writers have.
  nats = await createNatsBus({ url: TEST_NATS_URL, subjectPrefix: prefix });
  other = await createNatsBus({ url: TEST_NATS_URL, subjectPrefix: prefix });
});
afterAll(async () => {
  await nats?.close();
  await other?.close();
});

describe('the audit insert lock', () => {
  it.each([['NATS KV, two writers', () => [nats, other]], ['the in-process bus', () => { const bus = createMemoryBus(); return [bus, bus]; }]])('%s: never runs two inserts at once, and every one runs', async (_label, buses) => {
    const [a, b] = (buses as () => Bus[])();
    const locks = [await createInsertLock(a!), await createInsertLock(b!)];
    let running = 0, most = 0, done = 0;
    await Promise.all(Array.from({ length: 20 }, (_, i) => locks[i % 2]!(async () => {
      running += 1;
      most = Math.max(most, running);
      await new Promise((r) => setTimeout(r, 3));
      running -= 1;
      done += 1;
    })));
    expect(most).toBe(1);
    expect(done).toBe(20);
  });

  it('is released when the insert throws', async () => {
    const exclusively = await createInsertLock(nats);
    await expect(exclusively(async () => { throw new Error('insert failed'); })).rejects.toThrow('insert failed');
    expect(await exclusively(async () => 'next')).toBe('next');
  });

  it('two writers handed the same batch at the same moment store each entry once', async () => {
    // The store probes a batch for stored ids, then inserts; two inserts of one batch at once
    // would both find nothing stored (this is what the fault test once caught).
    const dir = makeTempDir('insert-lock');
    const store = await openAuditStore({ target: { kind: 'chdb', path: join(dir.path, 'audit') }, database: 'portcullis' });
    try {
      const agentId = 'agent-lock-race';
      const entries = Array.from({ length: 200 }, (_, i) => makeEntry({ agentId, timestamp: new Date(Date.UTC(2026, 9, 1) + i).toISOString() }));
      const [writerA, writerB] = [await createInsertLock(nats), await createInsertLock(other)];
      await Promise.all([writerA(() => store.insert(entries)), writerB(() => store.insert(entries))]);
      let lines = 0;
      for await (const chunk of store.exportLines({ agentIds: [agentId] }, { limit: 0, offset: 0 }, { format: 'ndjson', redactPolicyAgentIds: [] })) {
        lines += Buffer.from(chunk).toString('utf8').split('\n').filter(Boolean).length;
      }
      expect(lines).toBe(200);
    } finally {
      await store.close();
      dir.remove();
    }
  });
});
