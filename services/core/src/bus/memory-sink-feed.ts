import type { AuditEntry } from '../audit-entry.ts';
import type { SinkFeed } from './bus.ts';

const DEDUP_WINDOW = 100_000;

/**
 * The sink feed of the in-process bus: a queue per sink, holding its agent's final entries
 * published since the sink was opened (nothing is kept for agents without sinks). Like the
 * rest of the in-process bus it lives as long as the process.
 */
export function createMemorySinkFeed(): SinkFeed {
  const feeds = new Map<string, { agentId: string; queue: AuditEntry[]; wake?: () => void }>();
  const seen = new Set<string>();
  return {
    async publish(entries) {
      for (const entry of entries) {
        if (seen.has(entry.id)) continue;
        seen.add(entry.id);
        if (seen.size > DEDUP_WINDOW) seen.delete(seen.values().next().value!);
        for (const feed of feeds.values()) {
          if (feed.agentId !== entry.agentId) continue;
          feed.queue.push(entry);
          feed.wake?.();
        }
      }
    },
    async open(sinkId, agentId) {
      if (!feeds.has(sinkId)) feeds.set(sinkId, { agentId, queue: [] });
    },
    async remove(sinkId) {
      feeds.get(sinkId)?.wake?.();
      feeds.delete(sinkId);
    },
    async lag(sinkId) {
      return feeds.get(sinkId)?.queue.length;
    },
    async consume(sinkId, options) {
      let stopping = false;
      let wakeNow: (() => void) | undefined;
      const sleep = (ms: number) => new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, ms);
        wakeNow = () => { clearTimeout(timer); resolve(); };
      });
      const loop = (async () => {
        while (!stopping) {
          const feed = feeds.get(sinkId);
          if (!feed || feed.queue.length === 0) {
            if (feed) feed.wake = () => wakeNow?.();
            await sleep(feed ? 60_000 : 1_000);
            continue;
          }
          if (feed.queue.length < options.batchSize) await sleep(options.maxWaitMs);
          if (stopping) break;
          const batch = feed.queue.slice(0, options.batchSize);
          try {
            await options.handle(batch);
            // Acknowledged: off the queue (the same objects, so entries published meanwhile stay).
            feed.queue.splice(0, batch.length);
          } catch {
            await sleep(100);
          }
        }
      })();
      return { async stop() { stopping = true; wakeNow?.(); await loop; } };
    },
  };
}
