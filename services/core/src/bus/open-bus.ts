import type { Bus } from './bus.ts';
import { createMemoryBus } from './memory-bus.ts';
import { createNatsBus } from './nats-bus.ts';

/** NATS when `NATS_URL` is set, else the in-process bus. */
export async function openBus(config: { NATS_URL?: string | undefined; NATS_SUBJECT_PREFIX?: string | undefined; NATS_REPLICAS?: number | undefined }, name?: string): Promise<Bus> {
  if (!config.NATS_URL) return createMemoryBus();
  return createNatsBus({ url: config.NATS_URL, subjectPrefix: config.NATS_SUBJECT_PREFIX ?? '', replicas: config.NATS_REPLICAS ?? 1, ...(name ? { name } : {}) });
}
