import type { AuditEntry } from '../audit-entry.ts';
import { auditMessageId, type Bus } from './bus.ts';
import { openLocalLog, type LocalLog, type LocalLogOptions } from './local-log.ts';
import { createMemoryBus, type AuditJournal } from './memory-bus.ts';

/** A record of the audit log: an accepted entry, or the intent of a call being decided. */
type JournalRecord = { entry: AuditEntry } | { intent: AuditEntry };

const entryOf = (record: unknown, key: 'entry' | 'intent'): AuditEntry | undefined => {
  if (record === null || typeof record !== 'object' || !(key in record)) return undefined;
  const value = (record as Record<string, unknown>)[key];
  return value !== null && typeof value === 'object' && typeof (value as AuditEntry).id === 'string' ? value as AuditEntry : undefined;
};

/**
 * The audit journal over a local log (decision 070). A segment file is deleted once nothing in
 * it is needed: every entry in it stored by the writer, every intent in it answered by a
 * durable record of its call. Segments go oldest first, so whatever answers an intent is
 * still on disk while the intent is.
 */
export function createAuditJournal(log: LocalLog, report: (message: string, err?: unknown) => void): AuditJournal {
  /** Records each segment still has to keep, in segment order (segments only grow). */
  const needed = new Map<number, number>();
  /** The segment of each appended entry not yet handled by the writer, by message id. */
  const entrySegment = new Map<string, number>();
  /**
   * Intents of calls whose last record is not appended yet, by entry id; `answered` once a
   * record of the call was appended (the intent's segment is then released when that is durable).
   */
  const intents = new Map<string, { segment: number; written: Promise<void>; answered: boolean }>();
  let removing: Promise<void> = Promise.resolve();

  const hold = (segment: number) => { needed.set(segment, (needed.get(segment) ?? 0) + 1); };
  const release = (segment: number) => {
    needed.set(segment, (needed.get(segment) ?? 1) - 1);
    trim();
  };
  /** Deletes the oldest segments that keep nothing, up to the first that does (never the active one). */
  const trim = () => {
    for (const [oldest, count] of needed) {
      if (count > 0 || oldest >= log.activeSegment) break;
      needed.delete(oldest);
      removing = removing.then(() => log.remove(oldest)).catch((err: unknown) => report(`audit log: could not delete segment ${oldest}`, err));
    }
  };
  const keep = (entry: AuditEntry, segment: number) => {
    hold(segment);
    entrySegment.set(auditMessageId(entry), segment);
  };
  const forget = (entry: AuditEntry, segment: number) => {
    const messageId = auditMessageId(entry);
    if (entrySegment.get(messageId) !== segment) return;
    entrySegment.delete(messageId);
    release(segment);
  };

  // Replay: every entry of the kept segments once (the writer's store leaves out what it holds);
  // an intent with no record of its call anywhere stands for that call.
  const replay: AuditEntry[] = [];
  const recordedIds = new Set<string>();
  const recoveredIntents = new Map<string, { entry: AuditEntry; segment: number }>();
  for (const { segment, records } of log.recovered) {
    needed.set(segment, needed.get(segment) ?? 0);
    for (const record of records) {
      const entry = entryOf(record, 'entry');
      const intent = entryOf(record, 'intent');
      if (entry) {
        recordedIds.add(entry.id);
        if (entrySegment.has(auditMessageId(entry))) continue;
        keep(entry, segment);
        replay.push(entry);
      } else if (intent) {
        hold(segment);
        recoveredIntents.set(intent.id, { entry: intent, segment });
      } else {
        report(`audit log: segment ${segment} holds a record that is neither an entry nor an intent; skipped`);
      }
    }
  }
  for (const [id, { entry, segment }] of recoveredIntents) {
    if (recordedIds.has(id)) { release(segment); continue; }
    // Orphaned: its verdict never reached the log. Appended as an entry of its own before the old segment may go.
    const appended = log.append({ entry } satisfies JournalRecord);
    keep(entry, appended.segment);
    replay.push(entry);
    appended.durable.then(() => release(segment), (err: unknown) => report('audit log: could not keep an orphaned intent', err));
  }
  for (const problem of log.problems) report(`audit log: ${problem}`);
  if (replay.length > 0) report(`audit log: replaying ${replay.length} audit record(s) kept before the last stop (${recoveredIntents.size} intent(s))`);
  // Segments left with nothing to keep (everything already answered) go now.
  trim();

  return {
    replay,
    append(entry) {
      const intent = intents.get(entry.id);
      // Accepted once written (the record then survives the process); the group sync that makes
      // it survive the machine follows in the background, within the log's lazy sync (decision 070).
      const appended = log.append({ entry } satisfies JournalRecord, 'soon');
      keep(entry, appended.segment);
      // A record the log failed to keep is refused (the bus does not queue it): it holds its segment no more.
      appended.written.catch(() => forget(entry, appended.segment));
      if (!intent) return appended.written;
      if (entry.stage !== 'decision') intents.delete(entry.id); // the call's last record
      if (!intent.answered) {
        intent.answered = true;
        // The intent keeps its segment until this record is durable, so one of them is always on disk.
        appended.durable.then(() => release(intent.segment), () => undefined);
      }
      // The intent stands for the call until this record is on disk; both need only be written.
      return Promise.all([intent.written, appended.written]).then(() => undefined);
    },
    intend(entry) {
      const appended = log.append({ intent: entry } satisfies JournalRecord, 'soon');
      hold(appended.segment);
      intents.set(entry.id, { segment: appended.segment, written: appended.written, answered: false });
      return appended.written;
    },
    handled(entries) {
      for (const entry of entries) {
        const segment = entrySegment.get(auditMessageId(entry));
        if (segment !== undefined) forget(entry, segment);
      }
    },
    async close() {
      await log.close();
      await removing;
      // A clean stop after the writer drained leaves nothing to replay: the last segment goes too.
      if ([...needed.values()].every((count) => count === 0)) {
        for (const segment of needed.keys()) await log.remove(segment).catch((err: unknown) => report(`audit log: could not delete segment ${segment}`, err));
        await log.remove(log.activeSegment).catch((err: unknown) => report('audit log: could not delete the last segment', err));
      }
    },
  };
}

/**
 * The in-process bus of single-process mode with its audit entries kept in a local log under
 * `dir` (decision 070): an entry is accepted once it is written to the log (it survives the
 * process; one fdatasync per group follows in the background, within `lazySyncMs`), replayed into
 * the audit writer after a crash, and deleted once the writer stored it. `report` is told of
 * torn records dropped, replays, failed writes and syncs, and failed deletions.
 */
export function openDurableMemoryBus(options: LocalLogOptions & { report: (message: string, err?: unknown) => void }): Bus {
  const log = openLocalLog({ ...options, onFailure: (err) => options.report('audit log: a write or sync failed; its records are refused and the next ones go to a new segment', err) });
  return createMemoryBus({ journal: createAuditJournal(log, options.report) });
}
