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
