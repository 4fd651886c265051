import { randomUUID } from 'node:crypto';
import { deliverToSink, sinkEntryOf, type AuditEntry, type KeyValueBucket, type OutboundRule, type SinkFeed, type SinkTarget } from '@portcullis/core';

/** What a worker reports about its sink (written to `audit_sinks` by the caller). */
export interface SinkOutcomes {
  delivered(sinkId: string, count: number): void;
  failed(sinkId: string, message: string): void;
}

export interface SinkWorkerOptions {
  target: SinkTarget;
  /** The outbound destination rule (decision 058), checked again before every request. */
  destinations: OutboundRule;
  agentId: string;
  feed: SinkFeed;
  /** The lease bucket: one worker per sink across every audit replica, so entries go out in order. */
  leases: KeyValueBucket;
  outcomes: SinkOutcomes;
  /** Most entries in one request. */
  batchSize: number;
  /** Longest a partial batch waits. */
  maxWaitMs: number;
  /** First retry delay; doubled per failure (with jitter) up to `retryMaxMs`. */
  retryBaseMs: number;
  retryMaxMs: number;
  /** Lease lifetime; renewed at a third of it. */
  leaseTtlMs: number;
}

export interface SinkWorker { stop(): Promise<void> }

/**
 * Delivers one sink's entries (decision 055): takes the sink's lease (a KV key with
 * compare-and-set, lost after `leaseTtlMs` if its holder dies), then reads the sink's durable
 * consumer one batch at a time and retries each batch in place — exponential backoff with
 * jitter — until the sink takes it, so entries are delivered at least once and in order. A
 * worker that stops or loses its lease gives the batch back unacknowledged; the next holder
 * sends it again (a receiver de-duplicates by entry id).
 */
export function startSinkWorker(o: SinkWorkerOptions): SinkWorker {
  const key = `sink-${o.target.id}`;
  const holder = randomUUID();
  let running = true;
  const wakers = new Set<() => void>();
  const wake = () => { for (const w of wakers) w(); };
  const sleep = (ms: number) => new Promise<void>((resolve) => {
    const done = () => { clearTimeout(timer); wakers.delete(done); resolve(); };
    const timer = setTimeout(done, ms);
    wakers.add(done);
  });

  let revision = 0;
  const acquire = async (): Promise<boolean> => {
    const current = await o.leases.get(key);
    if (current && current.value !== holder) return false;
    const ok = await o.leases.compareAndSet(key, holder, current?.revision ?? 0);
    if (ok) revision = (await o.leases.get(key))?.revision ?? 0;
    return ok;
  };

  const loop = (async () => {
    while (running) {
      let held = await acquire().catch(() => false);
      if (!held) { await sleep(o.leaseTtlMs / 3); continue; }
      const renew = setInterval(() => {
        o.leases.compareAndSet(key, holder, revision)
          .then(async (ok: boolean) => {
            if (ok) revision = (await o.leases.get(key))?.revision ?? revision;
            else { held = false; wake(); }
          })
          .catch(() => undefined); // the bus is reconnecting: the next renewal tries again
      }, o.leaseTtlMs / 3);
      try {
        await o.feed.open(o.target.id, o.agentId);
        const consumer = await o.feed.consume(o.target.id, {
          batchSize: o.batchSize,
          maxWaitMs: o.maxWaitMs,
          handle: (batch) => deliverUntilTaken(batch, () => running && held),
        });
        while (running && held) await sleep(o.leaseTtlMs / 3);
        await consumer.stop();
      } catch (err) {
        o.outcomes.failed(o.target.id, `could not read the sink's queue: ${err instanceof Error ? err.message : String(err)}`);
        await sleep(1_000);
      } finally {
        clearInterval(renew);
        if (held) await o.leases.delete(key).catch(() => undefined);
      }
    }
  })();

  async function deliverUntilTaken(batch: AuditEntry[], mayContinue: () => boolean): Promise<void> {
    const entries = batch.map(sinkEntryOf);
    // Fetched after this worker stopped or lost its lease: back to the queue, for the holder.
    if (!mayContinue()) throw new Error('sink worker no longer holds the lease');
    for (let failures = 0; ; failures++) {
      try {
        await deliverToSink(o.target, entries, o.destinations);
        o.outcomes.delivered(o.target.id, entries.length);
        return;
      } catch (err) {
        o.outcomes.failed(o.target.id, err instanceof Error ? err.message : String(err));
      }
      await sleep(retryDelay(failures, o.retryBaseMs, o.retryMaxMs));
      if (!mayContinue()) throw new Error('sink worker stopped; the batch goes back to the queue');
    }
  }

  return {
    async stop() {
      running = false;
      wake();
      await loop;
    },
  };
}

/** Exponential backoff with "equal jitter": half the capped delay fixed, half random. */
export function retryDelay(failures: number, baseMs: number, maxMs: number): number {
  const capped = Math.min(maxMs, baseMs * 2 ** Math.min(failures, 30));
  return capped / 2 + Math.random() * (capped / 2);
}
