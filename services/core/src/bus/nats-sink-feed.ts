import { nanos, type NatsConnection } from '@nats-io/transport-node';
import { AckPolicy, DeliverPolicy, RetentionPolicy, StorageType, type JetStreamClient, type JetStreamManager, type JsMsg } from '@nats-io/jetstream';
import { auditEntryOf, type AuditEntry } from '../audit-entry.ts';
import type { SinkFeed } from './bus.ts';

/** A sink whose worker died holding a batch gets it back after this long. */
const ACK_WAIT_MS = 30_000;
/** The most entries a sink that is down keeps waiting: it receives them when it returns (decision 055). */
const MAX_AGE_MS = 7 * 24 * 3600_000;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * The sink feed on JetStream: stream `<prefix>AUDIT_FINAL` (interest retention, so an entry is
 * kept only until every sink of its agent acknowledged it, and not at all for agents without
 * sinks), one durable consumer `sink-<id>` per sink filtered to `audit.final.<agentId>`.
 */
export function createNatsSinkFeed(o: { nc: NatsConnection; js: JetStreamClient; jsm: JetStreamManager; prefix: string; replicas: number }): SinkFeed {
  const streamName = `${o.prefix.replace(/[^A-Za-z0-9_-]/g, '_')}AUDIT_FINAL`;
  const subject = `${o.prefix}audit.final`;
  const consumerName = (sinkId: string) => `sink-${sinkId}`;
  let stream: Promise<void> | undefined;
  const ensureStream = () => (stream ??= (async () => {
    try {
      await o.jsm.streams.info(streamName);
    } catch {
      await o.jsm.streams.add({
        name: streamName, subjects: [`${subject}.>`], storage: StorageType.File, retention: RetentionPolicy.Interest,
        num_replicas: o.replicas, max_age: nanos(MAX_AGE_MS), duplicate_window: nanos(10 * 60_000),
      }).catch(async (e: unknown) => { await o.jsm.streams.info(streamName).catch(() => { throw e; }); });
    }
  })().catch((err: unknown) => { stream = undefined; throw err; }));

  return {
    async publish(entries) {
      if (entries.length === 0) return;
      await ensureStream();
      await Promise.all(entries.map((e) => o.js.publish(`${subject}.${e.agentId}`, encoder.encode(JSON.stringify(e)), { msgID: e.id })));
    },
    async open(sinkId, agentId) {
      await ensureStream();
      try {
        await o.jsm.consumers.info(streamName, consumerName(sinkId));
      } catch {
        await o.jsm.consumers.add(streamName, {
          durable_name: consumerName(sinkId), filter_subject: `${subject}.${agentId}`,
          ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.New, ack_wait: nanos(ACK_WAIT_MS), max_ack_pending: 1_000,
        }).catch(async (e: unknown) => { await o.jsm.consumers.info(streamName, consumerName(sinkId)).catch(() => { throw e; }); });
      }
    },
    async remove(sinkId) {
      await o.jsm.consumers.delete(streamName, consumerName(sinkId)).catch(() => undefined);
    },
    async lag(sinkId) {
      const info = await o.jsm.consumers.info(streamName, consumerName(sinkId)).catch(() => undefined);
      return info ? info.num_pending + info.num_ack_pending : undefined;
    },
    async consume(sinkId, options) {
      await ensureStream();
      let stopping = false;
      const loop = (async () => {
        while (!stopping) {
          const msgs: JsMsg[] = [];
          try {
            const consumer = await o.js.consumers.get(streamName, consumerName(sinkId));
            const fetched = await consumer.fetch({ max_messages: options.batchSize, expires: Math.max(options.maxWaitMs, 1_000) });
            for await (const m of fetched) msgs.push(m);
          } catch {
            // The consumer is gone (sink deleted) or the connection is down: try again shortly.
            if (!stopping) await new Promise((resolve) => setTimeout(resolve, 1_000));
            continue;
          }
          if (msgs.length === 0) continue;
          const entries: AuditEntry[] = [];
          for (const m of msgs) {
            const entry = parse(m);
            if (entry) entries.push(entry);
          }
          // While the sink is retried the batch stays ours: JetStream does not hand it to another worker.
          const working = setInterval(() => { try { for (const m of msgs) m.working(); } catch { /* reconnecting */ } }, ACK_WAIT_MS / 3);
          try {
            if (entries.length > 0) await options.handle(entries);
            for (const m of msgs) m.ack();
            await o.nc.flush();
          } catch {
            for (const m of msgs) m.nak();
          } finally {
            clearInterval(working);
          }
        }
      })();
      return { async stop() { stopping = true; await loop; } };
    },
  };
}

function parse(m: JsMsg): AuditEntry | undefined {
  try {
    return auditEntryOf(JSON.parse(decoder.decode(m.data)));
  } catch {
    return undefined;
  }
}
