import { auditEntrySchema, type AuditEntry, type Bus } from '@portcullis/core';
import type { AuditStore } from './store/audit-store.ts';
import type { AuditLogger } from './handlers/grpc-errors.ts';

export interface AuditWriterOptions {
  bus: Pick<Bus, 'consumeAudit'>;
  store: Pick<AuditStore, 'insert'>;
  /** Most entries in one INSERT. */
  batchSize: number;
  /** Longest a partial batch waits before it is written. */
  maxWaitMs: number;
  log?: AuditLogger;
}

export interface AuditWriter {
  /** Messages that were not audit entries, sent to the dead-letter subject since the start. */
  readonly deadLettered: number;
  /** Writes everything the bus has already accepted, then stops. */
  drain(): Promise<void>;
  /** Stops taking batches; anything unacknowledged is redelivered to another writer later. */
  stop(): Promise<void>;
}

/**
 * Consume → batch → insert → ack. The bus acknowledges a batch only after `handle`
 * resolves, i.e. after ClickHouse took the INSERT; a failed INSERT throws, so the whole
 * batch is redelivered. Redelivery may write an entry twice; the table collapses it by id.
 */
export async function startAuditWriter(options: AuditWriterOptions): Promise<AuditWriter> {
  const log = options.log ?? (() => undefined);
  let deadLettered = 0;
  const consumer = await options.bus.consumeAudit({
    batchSize: options.batchSize,
    maxWaitMs: options.maxWaitMs,
    async handle(batch: AuditEntry[]) {
      const writable = withoutMalformed(batch, log);
      try {
        await options.store.insert(writable);
      } catch (err) {
        log(`audit writer: insert of ${writable.length} entries failed; they will be redelivered`, err);
        throw err;
      }
    },
    onDeadLetter(raw, error) {
      deadLettered += 1;
      log(`audit writer: dead-lettered a message (${error}): ${raw.slice(0, 200)}`);
    },
  });
  return { get deadLettered() { return deadLettered; }, drain: () => consumer.drain(), stop: () => consumer.stop() };
}

/**
 * Drops entries that could never be written (the NATS bus already dead-letters these; the
 * in-process bus hands entries over unchecked). Retrying them would block every later
 * entry behind one that can never succeed, so they are logged and acknowledged instead.
 */
function withoutMalformed(batch: AuditEntry[], log: AuditLogger): AuditEntry[] {
  const writable: AuditEntry[] = [];
  for (const entry of batch) {
    const parsed = auditEntrySchema.safeParse(entry);
    if (parsed.success) writable.push(parsed.data);
    else log(`audit writer: dropped malformed entry ${String((entry as { id?: unknown }).id)}: ${parsed.error.issues[0]?.message ?? 'invalid'}`);
  }
  return writable;
}
