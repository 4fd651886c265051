import type { Verdict } from './evaluate.ts';

/**
 * Per-session counts of allowed calls, keyed by policy KEY (not version), so editing a policy
 * does not reset what a session has already used. The decision point reads the counts of the
 * session-limited policies an action set holds, asks Cedar, and on ALLOW records the call for
 * those same keys — all in one synchronous step, so two concurrent calls of one session in
 * this process can never both pass a limit.
 *
 * The in-memory implementation is per process. A shared implementation (JetStream KV,
 * compare-and-set on the session's record) replaces it behind this interface when replicas
 * must agree: it reads the record with its revision, decides, and writes the increment with
 * the revision as the expected one, deciding again on a conflict.
 */
export interface SessionCounters {
  /** The allowed-call count of each of `policyKeys` in `sessionId`, in the same order (0 when never counted). */
  read(sessionId: string, policyKeys: readonly string[]): number[];
  /** Records one allowed call of `sessionId` for each of `policyKeys` (the session-limited policies covering the tool). */
  recordAllowed(sessionId: string, policyKeys: readonly string[]): void;
  /** Drops every count of `sessionId` (the session ended or was reset). */
  forget(sessionId: string): void;
}

export interface InMemorySessionCountersOptions {
  /** Sessions kept at most; the least recently used is forgotten first. Default 100 000. */
  maxSessions?: number;
}

/** Counters in this process's memory, least recently used sessions forgotten past `maxSessions`. */
export function createInMemorySessionCounters(options: InMemorySessionCountersOptions = {}): SessionCounters & { readonly size: number } {
  const maxSessions = options.maxSessions ?? 100_000;
  // Map keeps insertion order: re-inserting on use makes the first entry the least recently used.
  const sessions = new Map<string, Map<string, number>>();

  const touch = (sessionId: string): Map<string, number> | undefined => {
    const counts = sessions.get(sessionId);
    if (counts) {
      sessions.delete(sessionId);
      sessions.set(sessionId, counts);
    }
    return counts;
  };

  return {
    read(sessionId, policyKeys) {
      const counts = touch(sessionId);
      return policyKeys.map((key) => counts?.get(key) ?? 0);
    },
    recordAllowed(sessionId, policyKeys) {
      if (policyKeys.length === 0) return;
      let counts = touch(sessionId);
      if (!counts) {
        counts = new Map();
        sessions.set(sessionId, counts);
        if (sessions.size > maxSessions) sessions.delete(sessions.keys().next().value!);
      }
      for (const key of policyKeys) counts.set(key, (counts.get(key) ?? 0) + 1);
    },
    forget(sessionId) {
      sessions.delete(sessionId);
    },
    get size() {
      return sessions.size;
    },
  };
}

/**
 * Runs a decision with the session-limit counters of one session. `run` is the synchronous
 * `evaluate()`; the judge decides which counters it sees and makes its increment stick.
 */
export interface SessionJudge {
  /** Synchronous when the call touches no session-limited policy (the common case). */
  judge(sessionId: string | undefined, run: (sessions: SessionCounters | undefined) => Verdict): Verdict | Promise<Verdict>;
  /** The session ended: its counts start fresh. */
  forget(sessionId: string): Promise<void>;
}

/** The process's own counters behind the judge interface (tests, single decision point). */
export function localSessionJudge(counters: SessionCounters): SessionJudge {
  return {
    judge: (sessionId, run) => run(sessionId ? counters : undefined),
    forget: async (sessionId) => counters.forget(sessionId),
  };
}

/** Where session counters are shared: a compare-and-set key-value bucket (JetStream KV on NATS). */
export interface CounterStore {
  get(key: string): Promise<{ value: string; revision: number } | undefined>;
  compareAndSet(key: string, value: string, revision: number): Promise<boolean>;
  delete(key: string): Promise<void>;
}

/** After this many lost races on one session's record, the call is denied rather than retried forever. */
const MAX_ATTEMPTS = 64;
export const COUNTERS_CONTENDED_REASON = 'Denied: the session\'s call counters could not be updated (too many concurrent calls); retry';

/**
 * Counters every decision point shares: one record per session (`{policyKey: allowedCalls}`)
 * in `store`. A call is first judged against empty counters that only note whether they were
 * read; if no session-limited policy read them (most calls), that verdict stands with no I/O.
 * Otherwise: read the record with its revision, judge against it, and if the call was allowed
 * under a limit, write the increments naming that revision. Another decision point that wrote
 * first makes the write fail, and the call is judged again on the fresh record, so two replicas
 * serving one session never both let the N+1th call through.
 */
export function sharedSessionJudge(store: CounterStore): SessionJudge {
  return {
    judge(sessionId, run) {
      if (!sessionId) return run(undefined);
      let read = false;
      const probe: SessionCounters = {
        read: (_id, keys) => { read = true; return keys.map(() => 0); },
        recordAllowed: () => undefined,
        forget: () => undefined,
      };
      const first = run(probe);
      if (!read) return first;
      return (async () => {
        for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
          const record = await store.get(sessionId);
          const counts = parseCounts(record?.value);
          let changed = false;
          const verdict = run({
            read: (_id, keys) => keys.map((key) => counts[key] ?? 0),
            recordAllowed: (_id, keys) => { for (const key of keys) counts[key] = (counts[key] ?? 0) + 1; changed = keys.length > 0; },
            forget: () => undefined,
          });
          if (!changed || await store.compareAndSet(sessionId, JSON.stringify(counts), record?.revision ?? 0)) return verdict;
        }
        return {
          ...first, decision: 'DENY', reason: COUNTERS_CONTENDED_REASON,
          matchedPolicyKeys: [], matchedPolicyNames: [], matchedPolicyIds: [], policyVersionIds: [],
        };
      })();
    },
    forget: (sessionId) => store.delete(sessionId),
  };
}

function parseCounts(value: string | undefined): Record<string, number> {
  if (!value) return {};
  try {
    const parsed: unknown = JSON.parse(value);
    return parsed && typeof parsed === 'object' ? (parsed as Record<string, number>) : {};
  } catch {
    return {};
  }
}
