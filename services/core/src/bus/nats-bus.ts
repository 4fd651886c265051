import { connect, nanos, type NatsConnection } from '@nats-io/transport-node';
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager, JetStreamApiError, StorageType, type JsMsg } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { auditEntryOf, type AuditEntry } from '../audit-entry.ts';
import { createNatsSinkFeed } from './nats-sink-feed.ts';
import { auditMessageId, changeSubject, type AuditConsumer, type KeyValueBucket, type AuditConsumerOptions, type Bus, type ChangeEvent } from './bus.ts';

export interface NatsBusOptions {
  url: string;
  /** Prefix for every subject and the stream name; lets tests share one server. */
  subjectPrefix?: string;
  name?: string;
  /** JetStream replicas of the audit stream and the KV buckets (3 on a 3-node cluster). Default 1. */
  replicas?: number;
}

const encoder = new TextEncoder();

/** How long a starting service waits for JetStream (a cluster still electing its leaders answers nothing yet). */
const JETSTREAM_STARTUP_MS = 30_000;
/** A batch handed to a writer that dies is redelivered to another after this long. */
const ACK_WAIT_MS = 10_000;
/** Longest `drain()` waits for the stream's undelivered audit messages to reach the writer. */
const DRAIN_WAIT_MS = 5_000;

/**
 * Runs a JetStream management call, again while the server does not answer yet (a request
 * timeout, no responders, JetStream not ready) — a cluster that just started needs a few
 * seconds to elect its meta leader. Any other failure, or still none after 30 s, throws.
 */
async function untilJetStreamAnswers<T>(call: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + JETSTREAM_STARTUP_MS;
  for (;;) {
    try {
      return await call();
    } catch (err) {
      const text = err instanceof Error ? `${err.name} ${err.message}` : String(err);
      if (Date.now() > deadline || !/timeout|no responders|503|jetstream is not enabled|not ready|temporarily unavailable/i.test(text)) throw err;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
}
const decoder = new TextDecoder();

/**
 * Publishes made during one turn of the event loop, sent together at its end (`setImmediate`).
 * The NATS client writes its pending commands to the socket in a microtask after each publish,
 * so calls served by different I/O callbacks of one turn each paid a socket write — and each
 * write wakes `nats-server`: at 64 calls in flight in split mode those writes were ~19 % of the
 * gateway's event loop (bench/README, stop 26). Started in one callback, the publishes share a
 * write. A publish waits at most for the rest of its turn; its acknowledgement is awaited as before.
 */
function publishedInTurns() {
  let queued: Array<() => void> = [];
  const sendQueued = () => {
    const now = queued;
    queued = [];
    for (const start of now) start();
  };
  return <T>(publish: () => Promise<T>): Promise<T> => new Promise<T>((resolve, reject) => {
    if (queued.length === 0) setImmediate(sendQueued);
    queued.push(() => { publish().then(resolve, reject); });
  });
}

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
    // Without this every publish builds an Error up front, for a stack trace should it time
    // out: ~8 % of the gateway's CPU in a publish loop, for a trace our logs never show.
    noAsyncTraces: true,
  });
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  const inTurn = publishedInTurns();

  const streamConfig = {
    name: streamName,
    subjects: [`${auditSubject}.>`],
    storage: StorageType.File,
    num_replicas: options.replicas ?? 1,
    duplicate_window: nanos(10 * 60_000),
  };
  await untilJetStreamAnswers(async () => {
    try {
      await jsm.streams.info(streamName);
    } catch (err) {
      if (!(err instanceof JetStreamApiError)) throw err;
      await jsm.streams.add(streamConfig).catch(async (e: unknown) => {
        // another process created it first
        await jsm.streams.info(streamName).catch(() => { throw e; });
      });
    }
  });

  return {
    kind: 'nats',
    sinkFeed: createNatsSinkFeed({ nc, js, jsm, prefix, replicas: options.replicas ?? 1 }),
    async publishAudit(entry) {
      const data = encoder.encode(JSON.stringify(entry));
      await inTurn(() => js.publish(`${auditSubject}.${entry.agentId}`, data, { msgID: auditMessageId(entry) }));
    },
    async consumeAudit(opts: AuditConsumerOptions): Promise<AuditConsumer> {
      const ensureConsumer = async () => {
        try {
          await jsm.consumers.info(streamName, durable);
        } catch {
          await jsm.consumers.add(streamName, {
            durable_name: durable,
            ack_policy: AckPolicy.Explicit,
            deliver_policy: DeliverPolicy.All,
            ack_wait: nanos(ACK_WAIT_MS),
            max_ack_pending: 20_000,
          }).catch(() => undefined); // created concurrently by another writer
        }
        return js.consumers.get(streamName, durable);
      };
      /** A message that holds an audit entry, decoded as it arrived. */
      interface Received { msg: JsMsg; entry: AuditEntry }
      const handleBatch = async (batch: Received[]) => {
        // A long insert keeps its messages, and those of the next batch decoded meanwhile:
        // without this they would be redelivered to another writer once `ack_wait` passed.
        const working = setInterval(() => {
          // While the connection is down this may throw: the batch is then redelivered as usual.
          try { for (const r of [...batch, ...buffer]) r.msg.working(); } catch { /* reconnecting */ }
        }, ACK_WAIT_MS / 2);
        try {
          await opts.handle(batch.map((r) => r.entry), batch.map((r) => r.msg.data));
          for (const r of batch) r.msg.ack();
        } catch {
          // Redelivered with exponential backoff (1 s, 2 s, 4 s … at most 30 s) while the store is down.
          for (const r of batch) r.msg.nak(Math.min(1_000 * 2 ** Math.max(0, r.msg.info.deliveryCount - 1), 30_000));
        } finally {
          clearInterval(working);
        }
      };
      /** Decodes a message as it arrives (while the previous batch is being written); one that is not an entry is dead-lettered. */
      const receive = (m: JsMsg): Received | undefined => {
        const raw = decoder.decode(m.data);
        const entry = safeParse(raw);
        if (entry) return { msg: m, entry };
        nc.publish(deadSubject, m.data);
        opts.onDeadLetter?.(raw, 'not a valid audit entry');
        m.term();
        return undefined;
      };

      // A continuous pull: a batch is handled when it is full or `maxWaitMs` after its first
      // message, so an entry waits at most that long (plus the insert) to become queryable.
      // Batches are written one after another while the pull goes on decoding the next one;
      // `max_ack_pending` bounds how much is held unacknowledged meanwhile.
      const buffer: Received[] = [];
      let timer: NodeJS.Timeout | undefined;
      let chain: Promise<void> = Promise.resolve();
      /**
       * Queues the writing of every full batch and, with `all`, of what has arrived by the time
       * its turn comes. Not of what arrives while those are written: that waits for its own
       * batch to fill or its own `maxWaitMs` (the pull sets a timer for it), so that under a
       * steady load the writer inserts a batch per `maxWaitMs`, not back to back in small
       * inserts whose fixed cost in the engine is most of their cost.
       */
      const flush = (all: boolean) => {
        if (all && timer) { clearTimeout(timer); timer = undefined; }
        chain = chain.then(async () => {
          let due = all ? buffer.length : 0;
          while (buffer.length >= opts.batchSize || due > 0) {
            const batch = buffer.splice(0, opts.batchSize);
            due = Math.max(0, due - batch.length);
            await handleBatch(batch);
          }
        });
        return chain;
      };
      // The pull ends when the server it runs through goes away (a node restarts, the consumer's
      // leader moves): pull again, on whichever node the connection reaches now, until stopped.
      let stopping = false;
      let messages: Awaited<ReturnType<Awaited<ReturnType<typeof ensureConsumer>>['consume']>> | undefined;
      const first = await ensureConsumer();
      const loop = (async () => {
        let consumer: Awaited<ReturnType<typeof ensureConsumer>> | undefined = first;
        while (!stopping) {
          try {
            consumer ??= await ensureConsumer();
            // Pull requests expire after 5 s (heartbeats every 2.5 s), so a pull lost with a node
            // that died is noticed and re-issued within seconds rather than the default 30-60 s.
            messages = await consumer.consume({ max_messages: Math.max(opts.batchSize * 2, 256), expires: 5_000 });
            if (stopping) await messages.close();
            for await (const m of messages) {
              const received = receive(m);
              if (!received) continue;
              buffer.push(received);
              if (buffer.length === opts.batchSize) void flush(false);
              timer ??= setTimeout(() => void flush(true), opts.maxWaitMs);
            }
          } catch {
            // reconnecting: try again below
          }
          consumer = undefined;
          if (!stopping) await new Promise((resolve) => setTimeout(resolve, 250));
        }
      })();

      const stop = async () => {
        stopping = true;
        await messages?.close().catch(() => undefined);
        await loop;
        await flush(true);
      };
      // Drain: first let the pull deliver what the stream holds (bounded), so an entry the bus
      // accepted just before is written, not left for the next writer.
      const drain = async () => {
        const until = Date.now() + DRAIN_WAIT_MS;
        while (Date.now() < until) {
          const info = await jsm.consumers.info(streamName, durable).catch(() => undefined);
          if (!info || info.num_pending === 0) break;
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        await stop();
      };
      // On stop, entries not yet pulled stay in the stream (file storage) for the next writer.
      return { drain, stop };
    },
    onAuditEntry(handler) {
      // A core subscription: JetStream-published messages reach core subscribers too, so this
      // sees every publish (retries included) without a consumer, an ack or a replay.
      const sub = nc.subscribe(`${auditSubject}.>`, {
        callback: (err, msg) => {
          if (err) return;
          const entry = safeParse(decoder.decode(msg.data));
          if (entry) handler(entry);
        },
      });
      return () => sub.unsubscribe();
    },
    async keyValue(name, kvOptions): Promise<KeyValueBucket> {
      const kv = await untilJetStreamAnswers(() => new Kvm(nc).create(`${prefix.replace(/[^A-Za-z0-9_-]/g, '_')}${name}`, { history: 1, ttl: kvOptions.ttlMs, storage: 'file', replicas: options.replicas ?? 1 }));
      return {
        async get(key) {
          const entry = await kv.get(key);
          // A deleted key reads as absent: `create` (revision 0) may write it again.
          return entry?.operation === 'PUT' ? { value: entry.string(), revision: entry.revision } : undefined;
        },
        async compareAndSet(key, value, revision) {
          try {
            if (revision === 0) await kv.create(key, value);
            else await kv.update(key, value, revision);
            return true;
          } catch (err) {
            if (err instanceof Error && /wrong last sequence|key exists/i.test(err.message)) return false;
            throw err;
          }
        },
        async delete(key) {
          await kv.delete(key);
        },
      };
    },
    publishChange(event: ChangeEvent) {
      nc.publish(changeSubject(prefix, event), encoder.encode(JSON.stringify(event)));
    },
    onChange(handler) {
      const subs = ['policy.changed.*', 'agent.changed.*', 'key.revoked.*', 'grant.revoked.*', 'session.ended.*', 'approval.changed.*', 'dashboard_session.ended.*'].map((s) =>
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

/** The entry in a message (a shape check, not zod: these are the product's own messages). */
function safeParse(raw: string): AuditEntry | undefined {
  try {
    return auditEntryOf(JSON.parse(raw));
  } catch {
    return undefined;
  }
}
