import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import type { AuditEntry } from '../audit-entry.ts';
import { deleteTestStreams, TEST_NATS_URL, uniqueSubjectPrefix } from '../testing/index.ts';
import type { Bus } from './bus.ts';
import { createNatsBus } from './nats-bus.ts';

const prefix = uniqueSubjectPrefix('bus_live');
const streamName = `${prefix.replace(/[^A-Za-z0-9_-]/g, '_')}AUDIT`;

const entry = (over: Partial<AuditEntry> = {}): AuditEntry => ({
  id: randomUUID(), timestamp: new Date().toISOString(), agentId: randomUUID(), agentName: 'A', memberId: 'm', memberName: 'm@x', memberKeyId: 'k',
  service: 'github', tool: 'get_me', action: 'GithubMCP::Action::"get_me"', resource: 'GithubMCP::Service::"github"', callerIp: '127.0.0.1',
  toolArgs: {}, decision: 'ALLOW', reason: 'No forbid policy matched', matchedPolicyIds: [], matchedPolicyNames: [], policyVersionIds: [], policyDbIds: [],
  durationMs: 1, principal: 'Portcullis::Member::"m"', ...over,
});

/** Collects what a handler receives; `until` waits for a condition on it (5 s at most). */
function collector() {
  const seen: AuditEntry[] = [];
  const waiters = new Set<() => void>();
  return {
    seen,
    handler: (e: AuditEntry) => { seen.push(e); for (const w of [...waiters]) w(); },
    until(condition: (seen: AuditEntry[]) => boolean): Promise<void> {
      return new Promise((resolve, reject) => {
        const check = () => { if (condition(seen)) { waiters.delete(check); clearTimeout(timer); resolve(); } };
        const timer = setTimeout(() => { waiters.delete(check); reject(new Error(`condition not met; saw ${seen.length} entries`)); }, 5_000);
        waiters.add(check);
        check();
      });
    },
  };
}

describe('NATS bus: live audit entries (onAuditEntry)', () => {
  let replicaA: Bus;
  let replicaB: Bus;

  beforeAll(async () => {
    replicaA = await createNatsBus({ url: TEST_NATS_URL, subjectPrefix: prefix, name: 'replica-a' });
    replicaB = await createNatsBus({ url: TEST_NATS_URL, subjectPrefix: prefix, name: 'replica-b' });
  });
  afterAll(async () => {
    await replicaA?.close();
    await replicaB?.close();
    await deleteTestStreams(TEST_NATS_URL, prefix);
  });

  it('delivers every entry published through JetStream, on any agent, to every replica\'s subscriber', async () => {
    const onA = collector();
    const onB = collector();
    const offA = replicaA.onAuditEntry(onA.handler);
    const offB = replicaB.onAuditEntry(onB.handler);
    await replicaA.ping();
    await replicaB.ping();

    const published = [entry(), entry({ decision: 'DENY' }), entry({ sessionId: randomUUID() })];
    for (const e of published) await replicaA.publishAudit(e);
    const ids = published.map((e) => e.id);
    await onA.until((seen) => ids.every((id) => seen.some((s) => s.id === id)));
    await onB.until((seen) => ids.every((id) => seen.some((s) => s.id === id)));
    expect(onB.seen.filter((s) => ids.includes(s.id))).toEqual(published);
    offA();
    offB();
  });

  it('passes both stages of a call and every repeat of a publish (the durable stream keeps one copy each); callers de-duplicate', async () => {
    const live = collector();
    const off = replicaB.onAuditEntry(live.handler);
    await replicaB.ping();
    const decision = entry({ stage: 'decision', durationMs: 0 });
    const complete: AuditEntry = { ...decision, stage: 'complete', durationMs: 12 };
    await replicaA.publishAudit(decision);
    await replicaA.publishAudit(complete);
    await replicaA.publishAudit(complete); // a retried publish
    await live.until((seen) => seen.filter((s) => s.id === decision.id).length === 3);
    expect(live.seen.filter((s) => s.id === decision.id).map((s) => s.stage)).toEqual(['decision', 'complete', 'complete']);

    const nc = await connect({ servers: TEST_NATS_URL });
    try {
      const jsm = await jetstreamManager(nc);
      const stored = await jsm.streams.getMessage(streamName, { last_by_subj: `${prefix}audit.entries.${decision.agentId}` });
      expect(stored?.json<AuditEntry>()).toMatchObject({ id: decision.id, stage: 'complete' });
      const info = await jsm.streams.info(streamName, { subjects_filter: `${prefix}audit.entries.${decision.agentId}` });
      expect(info.state.subjects?.[`${prefix}audit.entries.${decision.agentId}`]).toBe(2);
    } finally {
      await nc.close();
    }
    off();
  });

  it('ignores messages that are not audit entries, and stops delivering once unsubscribed', async () => {
    const live = collector();
    const off = replicaA.onAuditEntry(live.handler);
    await replicaA.ping();
    const nc = await connect({ servers: TEST_NATS_URL });
    try {
      nc.publish(`${prefix}audit.entries.${randomUUID()}`, 'not json');
      nc.publish(`${prefix}audit.entries.${randomUUID()}`, JSON.stringify({ id: 'x' }));
      await nc.flush();
    } finally {
      await nc.close();
    }
    const marker = entry();
    await replicaB.publishAudit(marker);
    await live.until((seen) => seen.some((s) => s.id === marker.id));
    expect(live.seen.map((s) => s.id)).toEqual([marker.id]);

    off();
    await replicaA.ping();
    const control = collector();
    const offControl = replicaB.onAuditEntry(control.handler);
    await replicaB.ping();
    const after = entry();
    await replicaB.publishAudit(after);
    await control.until((seen) => seen.some((s) => s.id === after.id));
    await replicaA.ping();
    expect(live.seen.map((s) => s.id)).toEqual([marker.id]);
    offControl();
  });
});

describe('NATS bus: the audit consumer\'s batches under a steady stream', () => {
  const batchPrefix = uniqueSubjectPrefix('bus_batch');
  let bus: Bus;
  beforeAll(async () => { bus = await createNatsBus({ url: TEST_NATS_URL, subjectPrefix: batchPrefix, name: 'batching' }); });
  afterAll(async () => {
    await bus.close();
    await deleteTestStreams(TEST_NATS_URL, batchPrefix);
  });

  it('writes a partial batch once per wait, not back to back while entries keep arriving; every entry once', async () => {
    const batches: string[][] = [];
    // Each write takes 150 ms while an entry arrives every 20 ms for 2 s: a writer that went on
    // writing what arrived during its own write would make a batch every ~150 ms (13 or more);
    // one that waits makes one per 400 ms wait (about 6).
    const consumer = await bus.consumeAudit({
      batchSize: 10_000, maxWaitMs: 400,
      handle: async (batch) => { batches.push(batch.map((e) => e.id)); await new Promise((resolve) => setTimeout(resolve, 150)); },
    });
    const published: string[] = [];
    for (let i = 0; i < 100; i++) {
      const e = entry();
      published.push(e.id);
      await bus.publishAudit(e);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await consumer.drain();
    expect(batches.flat().sort()).toEqual([...published].sort());
    expect(batches.length).toBeGreaterThan(1);
    expect(batches.length).toBeLessThanOrEqual(9);
  });
});
