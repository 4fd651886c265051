import { SpanKind, type Span } from '@opentelemetry/api';
import { contextFromTraceHeaders, counter, histogram, tracerOf, type AuditEntry, type Bus } from '@portcullis/core';
import { createInsertLock } from './insert-lock.ts';
import type { AuditStore } from './store/audit-store.ts';
import type { AuditLogger } from './handlers/grpc-errors.ts';

export interface AuditWriterOptions {
  bus: Pick<Bus, 'consumeAudit' | 'keyValue'>;
  store: Pick<AuditStore, 'insert' | 'tidyOpenRecords'>;
  /** Most entries in one INSERT. */
  batchSize: number;
  /** Longest a partial batch waits before it is written. */
  maxWaitMs: number;
  log?: AuditLogger;
  /**
   * How often the writer tidies `audit_open` (deletes closed write-ahead records, settles
   * orphans older than `settleAfterMs`). Default 30 s; 0 turns it off.
   */
  tidyEveryMs?: number;
  /** Age past which an open write-ahead record is settled as an orphan (default 10 min). */
  settleAfterMs?: number;
  /**
   * The audit sinks (decision 055): after each insert, and after settling orphans, the final
   * entries of agents that have sinks are handed on, before the batch is acknowledged.
   */
  sinks?: SinkHandOff;
}

/** Where the writer hands final entries for the audit sinks. */
export interface SinkHandOff {
  /** Agents with at least one sink: other agents' entries are not published at all. */
  agentsWithSinks(): ReadonlySet<string>;
  publish(entries: readonly AuditEntry[]): Promise<void>;
}

export interface AuditWriter {
  /** Messages that were not audit entries, sent to the dead-letter subject since the start. */
  readonly deadLettered: number;
  /** Writes everything the bus has already accepted, then stops. */
  drain(): Promise<void>;
  /** Stops taking batches; anything unacknowledged is redelivered to another writer later. */
  stop(): Promise<void>;
}

const tracer = tracerOf('audit');
const written = counter('portcullis_audit_entries_written_total', 'Audit records inserted (a call\'s decision and completion records count separately; redeliveries too)');
const insertFailures = counter('portcullis_audit_insert_failures_total', 'Batches whose insert failed (they are redelivered)');
const deadLetters = counter('portcullis_audit_dead_letters_total', 'Messages that were not audit entries, sent to the dead-letter subject');
const batchSizes = histogram('portcullis_audit_batch_size', 'Entries per insert', [], [1, 10, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000]);
const lag = histogram('portcullis_audit_lag_seconds', 'From the call\'s decision to its record being queryable', [], [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300]);

/**
 * Consume → batch → insert → ack. The bus acknowledges a batch only after `handle`
 * resolves, i.e. after ClickHouse took the INSERT; a failed INSERT throws, so the whole
 * batch is redelivered. The store leaves out what it already holds, so a redelivered entry is written once.
 */
export async function startAuditWriter(options: AuditWriterOptions): Promise<AuditWriter> {
  const log = options.log ?? (() => undefined);
  let deadLettered = 0;
  const exclusively = await createInsertLock(options.bus);
  const consumer = await options.bus.consumeAudit({
    batchSize: options.batchSize,
    maxWaitMs: options.maxWaitMs,
    // The bus hands over entries it has checked the shape of (its dead-letter path takes the rest).
    async handle(writable: AuditEntry[], encoded?: Uint8Array[]) {
      // Each traced call's trace continues with its write (entries of untraced calls carry none).
      const spans: Span[] = writable.filter((e) => e.traceparent).map((e) =>
        tracer.startSpan('audit.write', { kind: SpanKind.CONSUMER, attributes: { 'portcullis.stage': e.stage ?? 'complete', 'portcullis.batch_size': writable.length } }, contextFromTraceHeaders({ traceparent: e.traceparent })));
      let stored = false;
      try {
        await exclusively(() => options.store.insert(writable, encoded));
        stored = true;
        // Outside the insert lock: the next writer's insert does not wait for the sinks' publish.
        if (options.sinks) await options.sinks.publish(finalEntriesFor(writable, options.sinks.agentsWithSinks()));
        for (const span of spans) span.end();
        written.inc(writable.length);
        batchSizes.observe(writable.length);
        const now = Date.now();
        for (const entry of writable) lag.observe(Math.max(0, now - Date.parse(entry.timestamp)) / 1000);
      } catch (err) {
        for (const span of spans) span.end();
        insertFailures.inc();
        log(stored
          ? `audit writer: handing ${writable.length} stored entries to the audit sinks failed; they will be redelivered (and not stored twice)`
          : `audit writer: insert of ${writable.length} entries failed; they will be redelivered`, err);
        throw err;
      }
    },
    onDeadLetter(raw, error) {
      deadLettered += 1;
      deadLetters.inc();
      log(`audit writer: dead-lettered a message (${error}): ${raw.slice(0, 200)}`);
    },
  });
  const tidyEveryMs = options.tidyEveryMs ?? DEFAULT_TIDY_EVERY_MS;
  let tidying: Promise<unknown> = Promise.resolve();
  const tidy = () => {
    // Under the insert lock: settling an orphan and the insert of its late completion must not interleave.
    const sinks = options.sinks;
    const withSinks = sinks && sinks.agentsWithSinks().size > 0;
    tidying = exclusively(() => options.store.tidyOpenRecords({ settleBefore: new Date(Date.now() - (options.settleAfterMs ?? DEFAULT_SETTLE_AFTER_MS)), returnSettled: withSinks }))
      .then((settled) => sinks && settled.length > 0 ? publishOrphans(sinks, settled) : undefined)
      .catch((err) => log('audit writer: tidying open write-ahead records failed; next round retries', err));
  };
  const timer = tidyEveryMs > 0 ? setInterval(tidy, tidyEveryMs) : undefined;
  timer?.unref();
  const stopTidying = async () => {
    if (timer) clearInterval(timer);
    await tidying;
  };
  return {
    get deadLettered() { return deadLettered; },
    drain: async () => { await stopTidying(); await consumer.drain(); },
    stop: async () => { await stopTidying(); await consumer.stop(); },
  };
}

/**
 * The entries of a stored batch that a sink receives: one per id, completions and single-stage
 * entries only (a write-ahead record reaches the sinks once it is settled as an orphan), of
 * agents with sinks. A redelivered batch yields them again: the feed drops ids it already holds.
 */
export function finalEntriesFor(batch: readonly AuditEntry[], agents: ReadonlySet<string>): AuditEntry[] {
  if (agents.size === 0) return [];
  const final = new Map<string, AuditEntry>();
  for (const entry of batch) if (entry.stage !== 'decision' && agents.has(entry.agentId)) final.set(entry.id, entry);
  return [...final.values()];
}

/**
 * Settled orphans go to the sinks best effort: the store no longer holds them open, so a failed
 * publish is retried here a few times and then logged (decision 055).
 */
async function publishOrphans(sinks: SinkHandOff, settled: readonly AuditEntry[]): Promise<void> {
  const agents = sinks.agentsWithSinks();
  const orphans = settled.filter((e) => agents.has(e.agentId));
  for (let attempt = 0; ; attempt++) {
    try {
      return await sinks.publish(orphans);
    } catch (err) {
      if (attempt >= 4) throw err;
      await new Promise((resolve) => setTimeout(resolve, 500 * 2 ** attempt));
    }
  }
}

const DEFAULT_TIDY_EVERY_MS = 30_000;
/** No completion can still be on its way after this long: an open record this old is an orphan. */
const DEFAULT_SETTLE_AFTER_MS = 10 * 60_000;

