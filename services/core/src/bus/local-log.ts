import { close as closeFd, closeSync, fdatasync, fsyncSync, mkdirSync, openSync, readdirSync, readFileSync, writeSync } from 'node:fs';
import { unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';

/**
 * A local append-only log of JSON records in numbered segment files (`0000000001.log`, …),
 * with group commit (decision 070). Each record is framed as
 * `[u32 payload length][u32 CRC-32 of the payload][payload: UTF-8 JSON]`, little-endian.
 *
 * - Records appended in the same turn of the event loop share one `write`, made at the end of
 *   that turn on the event loop itself: a write to the page cache takes tens of microseconds,
 *   less than a hop to libuv's thread pool and back, and the thread pool is where the embedded
 *   audit store's inserts and queries wait too (measured: a call's record waited 2-6 ms there at
 *   saturation). One `fdatasync` is in flight at a time, on the thread pool, and covers every
 *   record written before it started, so a burst of calls pays a few syncs, not one each.
 * - Opening reads every segment left by an earlier process (`recovered`); new records go to a
 *   fresh segment, so an old file is never appended to. A torn last record (a crash in the
 *   middle of a write) fails its length or checksum and is dropped with everything after it
 *   in its file, which an append-only writer cannot have written; the drop is reported in `problems`.
 */
export interface LocalLog {
  /**
   * Appends one record. `segment` is the file it goes to; `written` resolves once the write
   * returned (the record survives the process: it is in the kernel's page cache); `durable`
   * once an `fdatasync` that started after it was written returned (it survives the machine).
   * A failed write or sync rejects its records and every other record bound for that file (its
   * end is unknown); the next record starts a new segment, so a passing fault (a full disk)
   * does not outlast itself.
   *
   * `sync`: `'now'` (the default) starts a sync as soon as the record is written (or right after
   * the one in flight); `'soon'` is for a record nobody waits on the durability of: it rides on
   * the next sync, started at the latest `lazySyncMs` after it was written. So a sync someone
   * waits for does not queue behind one nobody needed yet.
   */
  append(record: unknown, sync?: 'now' | 'soon'): { segment: number; written: Promise<void>; durable: Promise<void> };
  /** The segments found at open, oldest first, with their complete records. */
  readonly recovered: ReadonlyArray<{ segment: number; records: unknown[] }>;
  /** What was dropped while reading them (torn or corrupt records), one line each. */
  readonly problems: readonly string[];
  /** The segment new records go to now. */
  readonly activeSegment: number;
  /** Deletes a segment file that no longer holds anything needed; the active segment only once the log is closed. */
  remove(segment: number): Promise<void>;
  /** `fdatasync` calls so far (group commit: fewer than records). */
  readonly syncs: number;
  /** `write` calls so far. */
  readonly writes: number;
  /** Waits for every record appended so far to be durable, then closes the file. */
  close(): Promise<void>;
}

export interface LocalLogOptions {
  dir: string;
  /** A segment holding at least this many bytes is closed and the next record starts a new one (default 4 MiB). */
  segmentBytes?: number;
  /** Told of each failed write or sync (its records are rejected). */
  onFailure?: (err: unknown) => void;
  /** Longest a `'soon'` record waits, written, for a sync (default 10 ms). */
  lazySyncMs?: number;
}

const HEADER_BYTES = 8;
const SEGMENT_NAME = /^(\d{10})\.log$/;
const DEFAULT_SEGMENT_BYTES = 4 * 1024 * 1024;
const DEFAULT_LAZY_SYNC_MS = 10;
/** What `fsync` on a directory answers where the file system does not support it. */
const DIRECTORY_SYNC_UNSUPPORTED = new Set(['EINVAL', 'ENOTSUP', 'EOPNOTSUPP', 'EISDIR', 'EPERM']);

interface Deferred { promise: Promise<void>; resolve(): void; reject(err: unknown): void }
function deferred(): Deferred {
  let resolve!: () => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<void>((res, rej) => { resolve = res; reject = rej; });
  // A caller that awaits only one of `written` / `durable` must not leave the other unhandled.
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}

interface Pending { segment: number; bytes: Buffer; now: boolean; written: Deferred; durable: Deferred }

const segmentFile = (dir: string, segment: number) => join(dir, `${String(segment).padStart(10, '0')}.log`);

/** Frames one record: length, CRC-32 of the payload, payload. */
export function frameRecord(record: unknown): Buffer {
  const payload = Buffer.from(JSON.stringify(record), 'utf8');
  const frame = Buffer.allocUnsafe(HEADER_BYTES + payload.length);
  frame.writeUInt32LE(payload.length, 0);
  frame.writeUInt32LE(crc32(payload), 4);
  payload.copy(frame, HEADER_BYTES);
  return frame;
}

/**
 * The complete records of one segment's bytes, up to the first that is cut short or fails its
 * checksum (`problem` says which and where; nothing after it is read).
 */
export function readRecords(bytes: Buffer): { records: unknown[]; problem?: string } {
  const records: unknown[] = [];
  let offset = 0;
  while (offset < bytes.length) {
    if (bytes.length - offset < HEADER_BYTES) return { records, problem: `torn record header at byte ${offset} (${bytes.length - offset} bytes left)` };
    const length = bytes.readUInt32LE(offset);
    const checksum = bytes.readUInt32LE(offset + 4);
    const end = offset + HEADER_BYTES + length;
    // A zero length is never written (a record is JSON); zeros are what a file extended by a crash reads as.
    if (length === 0) return { records, problem: `empty record at byte ${offset}` };
    if (end > bytes.length) return { records, problem: `torn record at byte ${offset}: ${length} bytes announced, ${bytes.length - offset - HEADER_BYTES} present` };
    const payload = bytes.subarray(offset + HEADER_BYTES, end);
    if (crc32(payload) !== checksum) {
      const where = end === bytes.length ? 'last record' : `record in the middle of the file (${bytes.length - end} bytes follow)`;
      return { records, problem: `checksum mismatch at byte ${offset}: ${where}` };
    }
    try {
      records.push(JSON.parse(payload.toString('utf8')));
    } catch {
      return { records, problem: `record at byte ${offset} is not JSON` };
    }
    offset = end;
  }
  return { records };
}

/** Opens the log in `dir` (created if missing): reads what is there, then appends to a new segment. */
export function openLocalLog(options: LocalLogOptions): LocalLog {
  const { dir } = options;
  const segmentBytes = options.segmentBytes ?? DEFAULT_SEGMENT_BYTES;
  mkdirSync(dir, { recursive: true, mode: 0o700 });

  const recovered: Array<{ segment: number; records: unknown[] }> = [];
  const problems: string[] = [];
  const found = readdirSync(dir).map((name) => SEGMENT_NAME.exec(name)).filter((m) => m !== null).map((m) => Number(m[1])).sort((a, b) => a - b);
  for (const segment of found) {
    const { records, problem } = readRecords(readFileSync(segmentFile(dir, segment)));
    if (problem) problems.push(`${segmentFile(dir, segment)}: ${problem}; ${records.length} complete record(s) before it kept, the rest dropped`);
    recovered.push({ segment, records });
  }

  let activeSegment = (found.at(-1) ?? 0) + 1;
  /** Bytes appended to the active segment, counted when appended (so the segment of a record is known at once). */
  let activeBytes = 0;
  let pending: Pending[] = [];
  let unsynced: Pending[] = [];
  let syncing: Promise<void> | undefined;
  /** Whether a written, unsynced record is waited for (`'now'`). */
  let syncWanted = false;
  let lazyTimer: NodeJS.Timeout | undefined;
  const lazySyncMs = options.lazySyncMs ?? DEFAULT_LAZY_SYNC_MS;
  let scheduled = false;
  /** Segments a write or sync failed in: nothing more is written to them. */
  const broken = new Set<number>();
  let writes = 0;
  let syncs = 0;
  let closed = false;
  /** The file being written: its segment, descriptor and end offset. */
  let file: { segment: number; fd: number; size: number } | undefined;

  const fail = (err: unknown, items: Pending[]) => {
    for (const item of items) { item.written.reject(err); item.durable.reject(err); broken.add(item.segment); }
    if (broken.has(activeSegment)) { activeSegment += 1; activeBytes = 0; }
  };

  /** `fdatasync` on the thread pool. */
  const datasync = (fd: number) => new Promise<void>((resolve, reject) => fdatasync(fd, (err) => (err ? reject(err) : resolve())));

  /** One `fdatasync` at a time; it covers every record written before it started. */
  const startSync = () => {
    if (syncing || unsynced.length === 0 || !file) return;
    if (lazyTimer) { clearTimeout(lazyTimer); lazyTimer = undefined; }
    const group = unsynced;
    unsynced = [];
    syncWanted = false;
    syncing = syncGroup(file.fd, group).finally(() => { syncing = undefined; requestSync(); });
  };

  const syncGroup = (fd: number, group: Pending[]) => datasync(fd).then(
    () => { syncs += 1; for (const item of group) item.durable.resolve(); },
    (err: unknown) => { options.onFailure?.(err); fail(err, group); },
  );

  /** A sync now when a written record is waited for, else one within `lazySyncMs`. */
  const requestSync = () => {
    if (unsynced.length === 0) return;
    if (syncWanted) startSync();
    else if (!lazyTimer && !syncing) {
      lazyTimer = setTimeout(() => { lazyTimer = undefined; startSync(); }, lazySyncMs);
      lazyTimer.unref();
    }
  };

  /**
   * Leaves the current file: what was written to it and not yet synced is synced on it (after
   * the sync in flight), then it is closed. The next file's records go on meanwhile.
   */
  const retireFile = () => {
    if (!file) return;
    const { fd } = file;
    const group = unsynced;
    unsynced = [];
    if (lazyTimer) { clearTimeout(lazyTimer); lazyTimer = undefined; }
    const retired = (syncing ?? Promise.resolve())
      .then(() => (group.length > 0 ? syncGroup(fd, group) : undefined))
      .finally(() => new Promise<void>((resolve) => closeFd(fd, () => resolve())));
    syncing = retired.finally(() => { if (syncing === retiredAndNext) syncing = undefined; requestSync(); });
    const retiredAndNext = syncing;
    file = undefined;
  };

  /** Makes every written record durable and closes the current file (at close). */
  const closeFile = async () => {
    while (syncing || unsynced.length > 0) { startSync(); await syncing; }
    if (file) closeSync(file.fd);
    file = undefined;
  };

  const openSegment = (segment: number) => {
    const fd = openSync(segmentFile(dir, segment), 'wx', 0o600);
    // The new file's name must survive a machine crash too: sync the directory once per segment.
    // (Some file systems cannot sync a directory: there the name is as durable as they make it.)
    const dirFd = openSync(dir, 'r');
    try {
      fsyncSync(dirFd);
    } catch (err) {
      if (!DIRECTORY_SYNC_UNSUPPORTED.has((err as NodeJS.ErrnoException).code ?? '')) {
        closeSync(fd);
        throw err;
      }
    } finally {
      closeSync(dirFd);
    }
    file = { segment, fd, size: 0 };
  };

  /** Writes what was appended in this turn of the event loop, one `write` per segment it spans. */
  const writeBatch = () => {
    if (pending.length === 0) return;
    const batch = pending;
    pending = [];
    // In append order; a batch spans two segments only around a rotation.
    for (let i = 0; i < batch.length;) {
      const segment = batch[i]!.segment;
      let j = i;
      while (j < batch.length && batch[j]!.segment === segment) j++;
      const run = batch.slice(i, j);
      i = j;
      if (broken.has(segment)) { fail(new Error(`an earlier write or sync to audit log segment ${segment} failed`), run); continue; }
      try {
        if (file?.segment !== segment) { retireFile(); openSegment(segment); }
        const bytes = run.length === 1 ? run[0]!.bytes : Buffer.concat(run.map((p) => p.bytes));
        const current = file!;
        let done = 0;
        while (done < bytes.length) done += writeSync(current.fd, bytes, done, bytes.length - done, current.size + done);
        current.size += bytes.length;
        writes += 1;
        for (const item of run) item.written.resolve();
        unsynced.push(...run);
        if (run.some((item) => item.now)) syncWanted = true;
        requestSync();
      } catch (err) {
        options.onFailure?.(err);
        fail(err, run);
      }
    }
  };

  return {
    append(record, sync = 'now') {
      const bytes = frameRecord(record);
      if (activeBytes > 0 && activeBytes + bytes.length > segmentBytes) { activeSegment += 1; activeBytes = 0; }
      activeBytes += bytes.length;
      const item: Pending = { segment: activeSegment, bytes, now: sync === 'now', written: deferred(), durable: deferred() };
      if (closed) fail(new Error('the local log is closed'), [item]);
      else {
        pending.push(item);
        // Everything appended in this turn of the event loop goes out in one write.
        if (!scheduled) {
          scheduled = true;
          queueMicrotask(() => { scheduled = false; writeBatch(); });
        }
      }
      return { segment: item.segment, written: item.written.promise, durable: item.durable.promise };
    },
    recovered,
    problems,
    get activeSegment() { return activeSegment; },
    async remove(segment) {
      if (!closed && segment >= activeSegment) return;
      await unlink(segmentFile(dir, segment)).catch((err: NodeJS.ErrnoException) => { if (err.code !== 'ENOENT') throw err; });
    },
    get syncs() { return syncs; },
    get writes() { return writes; },
    async close() {
      writeBatch();
      await closeFile();
      closed = true;
    },
  };
}
