import { randomUUID } from 'node:crypto';
import type { Bus } from '@portcullis/core';

/** A lock held longer than this (its writer died mid-insert) is dropped by the bus. */
const LOCK_TTL_MS = 10_000;
const RETRY_MS = 5;
const KEY = 'insert';
/**
 * A writer keeps the lock this long after an insert, so that back-to-back batches do not each
 * pay the bus round trips of taking and dropping it (measured: 100–450 ms a batch while the
 * writer's event loop decodes the next batch, a third of the writer's time).
 */
const LINGER_MS = 250;
/** …and takes it afresh after holding it this long: other writers get turns, and the TTL never lapses under it. */
const HOLD_MAX_MS = 2_000;

/**
 * One audit insert at a time across every writer on the bus (decision 035). Each batch is
 * probed for ids already stored before it is inserted; two writers handed copies of one entry
 * at the same moment (a redelivery racing its first delivery, a publish retried across a NATS
 * leader change) would each find the other's copy missing. Under this lock the probe and the
 * insert of one batch see every earlier batch. A NATS KV key with compare-and-set (the
 * in-process bus: a map); a writer that dies holding it loses it after `LOCK_TTL_MS`.
 * Within a process the work runs one at a time in call order; the key is kept between works
 * that follow each other closely (`LINGER_MS`, at most `HOLD_MAX_MS` in one go).
 */
export async function createInsertLock(bus: Pick<Bus, 'keyValue'>): Promise<<T>(work: () => Promise<T>) => Promise<T>> {
  const bucket = await bus.keyValue('audit-insert-lock', { ttlMs: LOCK_TTL_MS });
  let held: { owner: string; since: number } | undefined;
  let lingering: NodeJS.Timeout | undefined;
  let queue: Promise<unknown> = Promise.resolve();

  const acquire = async () => {
    const owner = randomUUID();
    while (!(await bucket.compareAndSet(KEY, owner, 0))) await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
    held = { owner, since: Date.now() };
  };
  const release = async () => {
    const mine = held;
    held = undefined;
    // Only our own: past the TTL another writer may hold it now.
    if (mine && (await bucket.get(KEY).catch(() => undefined))?.value === mine.owner) await bucket.delete(KEY).catch(() => undefined);
  };
  const serially = <T>(step: () => Promise<T>): Promise<T> => {
    const result = queue.then(step);
    queue = result.catch(() => undefined);
    return result;
  };

  return (work) => serially(async () => {
    if (lingering) { clearTimeout(lingering); lingering = undefined; }
    if (held && Date.now() - held.since > HOLD_MAX_MS) await release();
    if (!held) await acquire();
    try {
      return await work();
    } finally {
      lingering = setTimeout(() => { lingering = undefined; void serially(release); }, LINGER_MS);
      lingering.unref();
    }
  });
}
