import { eq } from 'drizzle-orm';
import { schema, sinkTargetOf, type AuditEntry, type Bus, type Database, type OutboundRule } from '@portcullis/core';
import type { AuditLogger } from '../handlers/grpc-errors.ts';
import type { SinkHandOff } from '../consumer.ts';
import { startSinkWorker, type SinkOutcomes, type SinkWorker } from './sink-worker.ts';

export interface SinkWorkersOptions {
  db: Database;
  bus: Pick<Bus, 'sinkFeed' | 'keyValue' | 'onChange'>;
  /** The server secret the sinks' secrets are sealed with. */
  serverSecret: string;
  /** Where sinks may deliver (decision 058): production or not, and `SINK_ALLOWED_HOSTS`. */
  destinations: OutboundRule;
  log: AuditLogger;
  /** How often the sink list is read again from Postgres (default 2 s). */
  refreshMs?: number;
  batchSize?: number;
  maxWaitMs?: number;
  retryBaseMs?: number;
  retryMaxMs?: number;
  leaseTtlMs?: number;
}

export interface SinkWorkers extends SinkHandOff {
  stop(): Promise<void>;
}

/** Delivery outcomes are written at most this often per sink while all goes well. */
const DELIVERED_WRITE_EVERY_MS = 5_000;

/**
 * The audit service's sink workers (decision 055): every `refreshMs` the sinks are read from
 * Postgres; each enabled one gets a worker (restarted when the sink changes, stopped when it is
 * deleted or paused). Every replica runs a worker per sink; the sink's lease lets one deliver at
 * a time. Also what the writer asks which agents have sinks (paused ones included: they collect).
 */
export async function startSinkWorkers(o: SinkWorkersOptions): Promise<SinkWorkers> {
  const leases = await o.bus.keyValue('audit-sink-leases', { ttlMs: o.leaseTtlMs ?? 15_000 });
  const workers = new Map<string, { version: string; worker: SinkWorker }>();
  let agents: ReadonlySet<string> = new Set();
  let known: ReadonlySet<string> = new Set();
  const lastDeliveredWrite = new Map<string, number>();

  const outcomes: SinkOutcomes = {
    delivered(sinkId) {
      const now = Date.now();
      if (now - (lastDeliveredWrite.get(sinkId) ?? 0) < DELIVERED_WRITE_EVERY_MS) return;
      lastDeliveredWrite.set(sinkId, now);
      o.db.update(schema.auditSinks).set({ lastDeliveredAt: new Date(now) }).where(eq(schema.auditSinks.id, sinkId))
        .catch((err: unknown) => o.log(`audit sinks: could not record a delivery of sink ${sinkId}`, err));
    },
    failed(sinkId, message) {
      lastDeliveredWrite.delete(sinkId);
      o.log(`audit sinks: delivery to sink ${sinkId} failed, retrying: ${message}`);
      o.db.update(schema.auditSinks).set({ lastError: message.slice(0, 500), lastErrorAt: new Date() }).where(eq(schema.auditSinks.id, sinkId))
        .catch((err: unknown) => o.log(`audit sinks: could not record the failure of sink ${sinkId}`, err));
    },
  };

  const refresh = async () => {
    const all = await o.db.select().from(schema.auditSinks);
    // A paused sink keeps collecting (its lag grows) until it is resumed or deleted.
    agents = new Set(all.map((r) => r.agentId));
    // Sinks gone since the last read without the API's delete (their agent was deleted): their consumers go too.
    const ids = new Set(all.map((r) => r.id));
    for (const id of known) if (!ids.has(id)) await o.bus.sinkFeed.remove(id).catch(() => undefined);
    known = ids;
    const rows = all.filter((r) => r.enabled);
    const wanted = new Map(rows.map((r) => [r.id, r]));
    for (const [id, running] of workers) {
      const row = wanted.get(id);
      if (!row || running.version !== row.updatedAt.toISOString()) {
        workers.delete(id);
        await running.worker.stop();
      }
    }
    for (const row of rows) {
      if (workers.has(row.id)) continue;
      let target;
      try {
        target = sinkTargetOf(o.serverSecret, row);
      } catch {
        outcomes.failed(row.id, 'its secret cannot be opened with this server\'s PORTCULLIS_SECRET');
        continue;
      }
      workers.set(row.id, {
        version: row.updatedAt.toISOString(),
        worker: startSinkWorker({
          target, destinations: o.destinations, agentId: row.agentId, feed: o.bus.sinkFeed, leases, outcomes,
          batchSize: o.batchSize ?? 100, maxWaitMs: o.maxWaitMs ?? 200,
          retryBaseMs: o.retryBaseMs ?? 1_000, retryMaxMs: o.retryMaxMs ?? 60_000, leaseTtlMs: o.leaseTtlMs ?? 15_000,
        }),
      });
    }
  };

  let refreshing: Promise<void> = refresh().catch((err: unknown) => o.log('audit sinks: reading the sinks failed; retrying', err));
  await refreshing;
  const again = () => {
    refreshing = refreshing.then(refresh).catch((err: unknown) => o.log('audit sinks: reading the sinks failed; retrying', err));
  };
  const timer = setInterval(again, o.refreshMs ?? 2_000);
  timer.unref();
  // The API announces a sink's creation, change or deletion as `agent.changed`: read them at once,
  // so the writer hands on the agent's entries from the first calls after the sink was added.
  const unsubscribe = o.bus.onChange((event) => { if (event.kind === 'agent.changed') again(); });

  return {
    agentsWithSinks: () => agents,
    publish: (entries: readonly AuditEntry[]) => o.bus.sinkFeed.publish(entries),
    async stop() {
      clearInterval(timer);
      unsubscribe();
      await refreshing;
      await Promise.all([...workers.values()].map((w) => w.worker.stop()));
      workers.clear();
    },
  };
}
