import type { Bus } from '@portcullis/core';

/**
 * Where a replica's live streams (the audit stream, the call-approval events) learn that the
 * dashboard session they were opened with has ended — logout, a revocation from the sessions
 * list, too many wrong MFA codes — on any replica: `dashboard_session.ended` on the bus
 * (decision 068). The bus is subscribed to only while something is watched.
 */
export interface SessionEnds {
  /** Calls `onEnded` once when `sessionId` ends; answers the function that stops watching. */
  watch(sessionId: string, onEnded: () => void): () => void;
  /** Stops watching everything and lets go of the bus. */
  close(): void;
}

export function createSessionEnds(bus: Pick<Bus, 'onChange'>): SessionEnds {
  const watchers = new Map<string, Set<() => void>>();
  let unsubscribe: (() => void) | undefined;

  const stopIfIdle = () => {
    if (watchers.size > 0 || !unsubscribe) return;
    unsubscribe();
    unsubscribe = undefined;
  };

  return {
    watch(sessionId, onEnded) {
      unsubscribe ??= bus.onChange((event) => {
        if (event.kind !== 'dashboard_session.ended') return;
        const ended = watchers.get(event.sessionId);
        if (!ended) return;
        watchers.delete(event.sessionId);
        for (const notify of ended) notify();
        stopIfIdle();
      });
      let forSession = watchers.get(sessionId);
      if (!forSession) watchers.set(sessionId, forSession = new Set());
      const watcher = () => onEnded();
      forSession.add(watcher);
      return () => {
        const current = watchers.get(sessionId);
        if (!current?.delete(watcher)) return;
        if (current.size === 0) watchers.delete(sessionId);
        stopIfIdle();
      };
    },
    close() {
      watchers.clear();
      stopIfIdle();
    },
  };
}
