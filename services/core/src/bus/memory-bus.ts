import { auditEntryOf, type AuditEntry } from '../audit-entry.ts';
import { createMemorySinkFeed } from './memory-sink-feed.ts';
import { auditMessageId, type AuditConsumer, type KeyValueBucket, type AuditConsumerOptions, type Bus, type ChangeEvent } from './bus.ts';

const DEDUP_WINDOW = 100_000;

/**
 * Where the in-process bus keeps the audit entries it accepts so that they outlive a crash
 * (`openDurableMemoryBus`, decision 070).
 */
export interface AuditJournal {
  /** Entries accepted before the process stopped and not known to be stored: the writer gets them first. */
  readonly replay: readonly AuditEntry[];
  /** Keeps an accepted entry; resolves once it counts as durably accepted, rejects if it cannot be kept. */
  append(entry: AuditEntry): Promise<void>;
  /** Keeps `entry` as what stands for a call if the process stops before any record of its id is appended. */
  intend(entry: AuditEntry): Promise<void>;
  /** Entries the writer is done with (stored, or dead-lettered): the journal need not keep them. */
  handled(entries: readonly AuditEntry[]): void;
  close(): Promise<void>;
}

/**
 * The in-process bus used by `npm start` without `NATS_URL`: the same contract as the
 * NATS bus (de-duplication by entry id, ack after the handler, redelivery on failure),
 * held in memory. Shutdown drains it, so a clean stop loses nothing; with a `journal` it also
 * keeps what it accepted across a crash (the product's composition always passes one, unit
 * tests that need no durability do not).
 */
export function createMemoryBus(options: { journal?: AuditJournal } = {}): Bus {
  const { journal } = options;
  const queue: AuditEntry[] = [];
  /** Message ids in the de-duplication window, oldest first (a Set keeps insertion order). */
  const seen = new Set<string>();
  const listeners = new Set<(event: ChangeEvent) => void>();
  const wakers = new Set<() => void>();
  const auditListeners = new Set<(entry: AuditEntry) => void>();
  let consumerCount = 0;
  const buckets = new Map<string, KeyValueBucket>();

  const wake = () => { for (const w of wakers) w(); };
  for (const entry of journal?.replay ?? []) {
    seen.add(auditMessageId(entry));
    queue.push(entry);
  }

  return {
    kind: 'memory',
    sinkFeed: createMemorySinkFeed(),
    async publishAudit(entry) {
      // Live listeners see every publish, as NATS core subscribers do (they de-duplicate by id).
      for (const l of auditListeners) queueMicrotask(() => l(entry));
      const messageId = auditMessageId(entry);
      if (seen.has(messageId)) return;
      seen.add(messageId);
      if (seen.size > DEDUP_WINDOW) seen.delete(seen.values().next().value!);
      if (journal) {
        try {
          await journal.append(entry);
        } catch (err) {
          seen.delete(messageId); // not kept: a retry must not be taken for a repeat
          throw err;
        }
      }
      queue.push(entry);
      wake();
    },
    ...(journal ? { intendAudit: (entry: AuditEntry) => journal.intend(entry) } : {}),
    async consumeAudit(options: AuditConsumerOptions): Promise<AuditConsumer> {
      consumerCount += 1;
      let running = true;
      let inFlight: AuditEntry[] = [];
      let wakeLoop: (() => void) | undefined;
      // While a partial batch lingers (up to `maxWaitMs`), a new entry wakes the writer only once
      // the batch is full: one insert per batch, not one per call.
      let lingering = false;
      const waker = () => { if (!lingering || queue.length >= options.batchSize) wakeLoop?.(); };
      wakers.add(waker);

      const sleep = (ms: number) => new Promise<void>((resolve) => {
        const timer = setTimeout(() => { wakeLoop = undefined; resolve(); }, ms);
        wakeLoop = () => { clearTimeout(timer); wakeLoop = undefined; resolve(); };
      });

      const handleOnce = async (): Promise<boolean> => {
        if (queue.length === 0) return true;
        inFlight = queue.splice(0, options.batchSize);
        // As from NATS: the handler gets entries with the entry's shape; anything else is dead-lettered.
        const entries: AuditEntry[] = [];
        for (const published of inFlight) {
          const checked = auditEntryOf(published);
          if (checked) entries.push(checked);
          else options.onDeadLetter?.(JSON.stringify(published) ?? String(published), 'not a valid audit entry');
        }
        try {
          if (entries.length > 0) await options.handle(entries);
          journal?.handled(inFlight);
          inFlight = [];
          return true;
        } catch {
          queue.unshift(...inFlight); // redeliver, in order
          inFlight = [];
          return false;
        }
      };

      const loop = (async () => {
        let backoff = 100;
        while (running) {
          if (queue.length === 0) await sleep(60_000);
          if (running && queue.length > 0 && queue.length < options.batchSize) {
            lingering = true;
            await sleep(options.maxWaitMs);
            lingering = false;
          }
          if (!running) break;
          if (await handleOnce()) backoff = 100;
          else { await sleep(backoff); backoff = Math.min(backoff * 2, 5_000); }
        }
      })();

      const stop = async () => {
        running = false;
        wakeLoop?.();
        await loop;
        wakers.delete(waker);
        consumerCount -= 1;
      };

      return {
        async drain() {
          await stop();
          for (let attempt = 0; queue.length > 0 && attempt < 50; attempt++) {
            if (!(await handleOnce())) await new Promise((r) => setTimeout(r, 200));
          }
        },
        stop,
      };
    },
    async keyValue(name) {
      let bucket = buckets.get(name);
      if (!bucket) buckets.set(name, bucket = createMemoryKeyValue());
      return bucket;
    },
    onAuditEntry(handler) {
      auditListeners.add(handler);
      return () => auditListeners.delete(handler);
    },
    publishChange(event) {
      for (const l of listeners) queueMicrotask(() => l(event));
    },
    onChange(handler) {
      listeners.add(handler);
      return () => listeners.delete(handler);
    },
    async ping() {},
    async close() {
      listeners.clear();
      auditListeners.clear();
      void consumerCount;
      await journal?.close();
    },
  };
}

/** A `KeyValueBucket` in this process: revisions count every write of the bucket, as JetStream's do. */
function createMemoryKeyValue(): KeyValueBucket {
  const entries = new Map<string, { value: string; revision: number }>();
  let lastRevision = 0;
  return {
    async get(key) {
      const entry = entries.get(key);
      return entry ? { ...entry } : undefined;
    },
    async compareAndSet(key, value, revision) {
      if ((entries.get(key)?.revision ?? 0) !== revision) return false;
      entries.set(key, { value, revision: ++lastRevision });
      return true;
    },
    async delete(key) {
      entries.delete(key);
    },
  };
}
