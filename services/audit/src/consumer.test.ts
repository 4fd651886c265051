import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '@nats-io/transport-node';
import { createNatsBus, type AuditEntry, type Bus } from '@portcullis/core';
import { TEST_NATS_URL, uniqueSubjectPrefix } from '@portcullis/core/testing';
import { startAuditWriter } from './consumer.ts';
import { openAuditStore, type AuditStore } from './store/audit-store.ts';
import { makeEntry, makeTempDir } from './testing/audit-entries.ts';
import { deleteAuditStream } from './testing/nats-streams.ts';

const dir = makeTempDir('writer');
const prefix = uniqueSubjectPrefix('audit_writer');
let bus: Bus;
let store: AuditStore;

beforeAll(async () => {
  bus = await createNatsBus({ url: TEST_NATS_URL, subjectPrefix: prefix });
  store = await openAuditStore({ target: { kind: 'chdb', path: join(dir.path, 'audit') }, database: 'portcullis' });
});

afterAll(async () => {
  await bus?.close();
  await store?.close();
  await deleteAuditStream(TEST_NATS_URL, prefix);
  dir.remove();
});

async function until(condition: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function idsOf(agentId: string): Promise<{ ids: string[]; total: number }> {
  const { entries, total } = await store.query({ agentIds: [agentId] }, { limit: 500, offset: 0 });
  return { ids: entries.map((e) => e.id), total };
}

describe('audit writer over NATS JetStream', () => {
  it('writes every published entry once, through duplicate publishes and a redelivered batch', async () => {
    const agentId = 'agent-writer-1';
    const entries = Array.from({ length: 300 }, (_, i) => makeEntry({ agentId, timestamp: new Date(Date.UTC(2026, 9, 1) + i).toISOString() }));
    // The first batch is inserted and then "lost" before the ack (as if the writer died),
    // so JetStream redelivers it and the same rows are inserted a second time.
    let lostAcks = 0;
    let rowsInserted = 0;
    const flakyStore = {
      tidyOpenRecords: (options: { settleBefore?: Date }) => store.tidyOpenRecords(options),
      async insert(batch: readonly AuditEntry[]) {
        await store.insert(batch);
        rowsInserted += batch.length;
        if (lostAcks === 0) {
          lostAcks += 1;
          throw new Error('ack lost after insert');
        }
      },
    };
    const writer = await startAuditWriter({ bus, store: flakyStore, batchSize: 50, maxWaitMs: 50 });
    try {
      await Promise.all(entries.map((e) => bus.publishAudit(e)));
      await Promise.all(entries.slice(0, 30).map((e) => bus.publishAudit(e))); // same ids again
      await until(async () => rowsInserted > 300 && (await idsOf(agentId)).total === 300);
    } finally {
      await writer.drain();
    }
    expect(lostAcks).toBe(1);
    const { ids, total } = await idsOf(agentId);
    expect(total).toBe(300);
    expect(new Set(ids).size).toBe(300);
    expect([...ids].sort()).toEqual(entries.map((e) => e.id).sort());
  });

  it('sends a message that is not an audit entry to the dead-letter subject, counts it, and writes the entries after it', async () => {
    const agentId = 'agent-writer-dead';
    const nc = await connect({ servers: TEST_NATS_URL });
    const deadLetters: string[] = [];
    const sub = nc.subscribe(`${prefix}audit.dead`, { callback: (_err, msg) => { deadLetters.push(msg.string()); } });
    await nc.flush();
    const writer = await startAuditWriter({ bus, store, batchSize: 50, maxWaitMs: 50 });
    try {
      const { jetstream } = await import('@nats-io/jetstream');
      await jetstream(nc).publish(`${prefix}audit.entries.${agentId}`, 'not json {', { msgID: 'garbage-1' });
      const good = makeEntry({ agentId });
      await bus.publishAudit(good);
      await until(async () => (await idsOf(agentId)).total === 1 && writer.deadLettered === 1);
      expect(deadLetters).toEqual(['not json {']);
    } finally {
      await writer.drain();
      sub.unsubscribe();
      await nc.close();
    }
  });

  it('hands each call\'s final entry to the sink feed once: a completion in place of its write-ahead record, an orphan once settled (decision 055)', async () => {
    const agentId = `agent-sinks-${Date.now()}`;
    const sinkId = `sink-test-${Date.now()}`;
    await bus.sinkFeed.open(sinkId, agentId);
    const call = makeEntry({ agentId });
    const orphan = makeEntry({ agentId, timestamp: new Date(Date.now() - 3_600_000).toISOString(), stage: 'decision', reason: 'No forbid policy matched; outcome not recorded: forwarded upstream, no completion received' });
    const writer = await startAuditWriter({
      bus, store, batchSize: 50, maxWaitMs: 50, tidyEveryMs: 300, settleAfterMs: 600_000,
      sinks: { agentsWithSinks: () => new Set([agentId]), publish: (entries) => bus.sinkFeed.publish(entries) },
    });
    const received: AuditEntry[] = [];
    const consumer = await bus.sinkFeed.consume(sinkId, { batchSize: 10, maxWaitMs: 50, handle: async (batch) => { received.push(...batch); } });
    try {
      await bus.publishAudit({ ...call, stage: 'decision' });
      await bus.publishAudit({ ...call, stage: 'complete' });
      await bus.publishAudit(orphan);
      await bus.publishAudit(makeEntry({ agentId: 'agent-without-sinks' }));
      await until(async () => received.length >= 2);
      await new Promise((r) => setTimeout(r, 700)); // another tidy round settles nothing twice
    } finally {
      await consumer.stop();
      await writer.drain();
      await bus.sinkFeed.remove(sinkId);
    }
    expect(received.map((e) => [e.id, e.stage ?? 'complete'])).toEqual([[call.id, 'complete'], [orphan.id, 'decision']]);
    expect(received[1]!.reason).toMatch(/outcome not recorded/);
  });

  it('drain() writes everything already accepted before it returns', async () => {
    const agentId = 'agent-writer-2';
    const entries = Array.from({ length: 120 }, (_, i) => makeEntry({ agentId, timestamp: new Date(Date.UTC(2026, 9, 2) + i).toISOString() }));
    const writer = await startAuditWriter({ bus, store, batchSize: 1_000, maxWaitMs: 200 });
    await Promise.all(entries.map((e) => bus.publishAudit(e)));
    await writer.drain();
    const { ids, total } = await idsOf(agentId);
    expect(total).toBe(120);
    expect(new Set(ids).size).toBe(120);
  });
});
