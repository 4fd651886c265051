import { connect, nanos, type NatsConnection } from '@nats-io/transport-node';
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager, JetStreamApiError, StorageType, type JsMsg } from '@nats-io/jetstream';
import { auditEntrySchema, type AuditEntry } from '../audit-entry.ts';
import { changeSubject, type AuditConsumer, type AuditConsumerOptions, type Bus, type ChangeEvent } from './bus.ts';

export interface NatsBusOptions {
  url: string;
  /** Prefix for every subject and the stream name; lets tests share one server. */
  subjectPrefix?: string;
  name?: string;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * The NATS bus. Audit entries go to JetStream stream `AUDIT` (file storage, de-duplication
 * window keyed by `Nats-Msg-Id` = entry id) and are read by the durable consumer
 * `audit-writer`, shared by every writer. Change events use core pub/sub.
 */
export async function createNatsBus(options: NatsBusOptions): Promise<Bus> {
  const prefix = options.subjectPrefix ?? '';
  const streamName = `${prefix.replace(/[^A-Za-z0-9_-]/g, '_')}AUDIT`;
  const auditSubject = `${prefix}audit.entries`;
  const deadSubject = `${prefix}audit.dead`;
  const durable = 'audit-writer';

  const nc: NatsConnection = await connect({
    servers: options.url.split(','),
    name: options.name ?? 'portcullis',
    maxReconnectAttempts: -1,
    reconnectTimeWait: 250,
  });
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);

  const streamConfig = {
    name: streamName,
    subjects: [`${auditSubject}.>`],
    storage: StorageType.File,
    duplicate_window: nanos(10 * 60_000),
  };
  try {
    await jsm.streams.info(streamName);
  } catch (err) {
    if (!(err instanceof JetStreamApiError)) throw err;
    await jsm.streams.add(streamConfig).catch(async (e: unknown) => {
      // another process created it first
      await jsm.streams.info(streamName).catch(() => { throw e; });
    });
  }

  return {
    kind: 'nats',
    async publishAudit(entry) {
      await js.publish(`${auditSubject}.${entry.agentId}`, encoder.encode(JSON.stringify(entry)), { msgID: entry.id });
    },
    async consumeAudit(opts: AuditConsumerOptions): Promise<AuditConsumer> {
      try {
        await jsm.consumers.info(streamName, durable);
      } catch {
        await jsm.consumers.add(streamName, {
          durable_name: durable,
          ack_policy: AckPolicy.Explicit,
          deliver_policy: DeliverPolicy.All,
          ack_wait: nanos(30_000),
          max_ack_pending: 20_000,
        }).catch(() => undefined); // created concurrently by another writer
      }
      const consumer = await js.consumers.get(streamName, durable);
      let running = true;

      const handleBatch = async (msgs: JsMsg[]) => {
        const entries: AuditEntry[] = [];
        const good: JsMsg[] = [];
        for (const m of msgs) {
          const raw = decoder.decode(m.data);
          const parsed = safeParse(raw);
          if (parsed) { entries.push(parsed); good.push(m); continue; }
          nc.publish(deadSubject, m.data);
          opts.onDeadLetter?.(raw, 'not a valid audit entry');
          m.term();
        }
        if (entries.length === 0) return;
        try {
          await opts.handle(entries);
          for (const m of good) m.ack();
        } catch {
          for (const m of good) m.nak(1_000);
        }
      };

      const pullOnce = async (expiresMs: number): Promise<number> => {
        const iter = await consumer.fetch({ max_messages: opts.batchSize, expires: Math.max(expiresMs, 1_000) });
        const batch: JsMsg[] = [];
        for await (const m of iter) batch.push(m);
        await handleBatch(batch);
        return batch.length;
      };

      const loop = (async () => {
        while (running) {
          try {
            await pullOnce(opts.maxWaitMs);
          } catch {
            if (running) await new Promise((r) => setTimeout(r, 500));
          }
        }
      })();

      const stop = async () => { running = false; await loop; };
      return {
        async drain() {
          await stop();
          // Take what is already pending, without waiting for more.
          for (let i = 0; i < 1_000; i++) {
            const info = await consumer.info().catch(() => undefined);
            if (!info || info.num_pending + info.num_ack_pending === 0) break;
            if ((await pullOnce(1_000)) === 0 && info.num_pending === 0) break;
          }
        },
        stop,
      };
    },
    publishChange(event: ChangeEvent) {
      nc.publish(changeSubject(prefix, event), encoder.encode(JSON.stringify(event)));
    },
    onChange(handler) {
      const subs = ['policy.changed.*', 'agent.changed.*', 'key.revoked.*'].map((s) =>
        nc.subscribe(`${prefix}${s}`, {
          callback: (err, msg) => {
            if (err) return;
            try { handler(JSON.parse(decoder.decode(msg.data)) as ChangeEvent); } catch { /* ignore malformed events */ }
          },
        }),
      );
      return () => { for (const s of subs) s.unsubscribe(); };
    },
    async ping() {
      await nc.flush();
    },
    async close() {
      await nc.drain().catch(() => nc.close());
    },
  };
}

function safeParse(raw: string): AuditEntry | undefined {
  try {
    const result = auditEntrySchema.safeParse(JSON.parse(raw));
    return result.success ? result.data : undefined;
  } catch {
    return undefined;
  }
}
