import { randomUUID } from 'node:crypto';
import type { Bus } from '@portcullis/core';

/** A lock held longer than this (its writer died mid-insert) is dropped by the bus. */
const LOCK_TTL_MS = 10_000;
const RETRY_MS = 5;
const KEY = 'insert';

/**
 * One audit insert at a time across every writer on the bus (decision 035). Each batch is
 * probed for ids already stored before it is inserted; two writers handed copies of one entry
 * at the same moment (a redelivery racing its first delivery, a publish retried across a NATS
 * leader change) would each find the other's copy missing. Under this lock the probe and the
 * insert of one batch see every earlier batch. A NATS KV key with compare-and-set (the
 * in-process bus: a map); a writer that dies holding it loses it after `LOCK_TTL_MS`.
 */
export async function createInsertLock(bus: Pick<Bus, 'keyValue'>): Promise<<T>(work: () => Promise<T>) => Promise<T>> {
  const bucket = await bus.keyValue('audit-insert-lock', { ttlMs: LOCK_TTL_MS });
  return async (work) => {
    const owner = randomUUID();
    while (!(await bucket.compareAndSet(KEY, owner, 0))) await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
    try {
      return await work();
    } finally {
      // Only our own: past the TTL another writer may hold it now.
      if ((await bucket.get(KEY).catch(() => undefined))?.value === owner) await bucket.delete(KEY).catch(() => undefined);
    }
  };
}
