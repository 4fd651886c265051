import type { AuditEntry, Bus } from '@portcullis/core';

export interface AuditPublisher {
  /** Hands an entry to the bus without blocking the caller's response. */
  publish(entry: AuditEntry): void;
  /**
   * Resolves once the bus has durably accepted `entry` (the write-ahead record of a call about
   * to go upstream); rejects with `AuditUnavailable` when it cannot within the deadline.
   */
  record(entry: AuditEntry): Promise<void>;
  /**
   * Single-process mode (decision 070): starts making `entry` durable as what stands for a call
   * about to be decided, so that sync overlaps the wait for the verdict. Resolves once it is
   * durable, at once on NATS (nothing to do); never rejects: a failure surfaces in the `record`
   * of the same call.
   */
  intend(entry: AuditEntry): Promise<void>;
  /** Resolves when every entry handed over so far has been accepted by the bus. */
  flush(): Promise<void>;
  readonly failures: number;
}

/** The bus did not accept a write-ahead record in time: the call must not go upstream. */
export class AuditUnavailable extends Error {}

/** How long a call waits for its write-ahead record to be accepted before it is refused. */
const RECORD_DEADLINE_MS = 5_000;

/**
 * Publishes entries with a bounded number of acknowledgements in flight. An entry the bus
 * refuses is retried with backoff (its id makes a repeat harmless), so a passing bus outage
 * delays entries rather than losing them.
 */
export function createAuditPublisher(deps: { bus: Bus; maxInFlight?: number; recordDeadlineMs?: number; onError?: (err: unknown) => void }): AuditPublisher {
  const maxInFlight = deps.maxInFlight ?? 1_024;
  const waiting: AuditEntry[] = [];
  const inFlight = new Set<Promise<void>>();
  let failures = 0;
  let idle: Array<() => void> = [];

  const settleIdle = () => {
    if (waiting.length === 0 && inFlight.size === 0) { for (const r of idle) r(); idle = []; }
  };

  const send = (entry: AuditEntry, attempt: number) => {
    const p: Promise<void> = deps.bus.publishAudit(entry).then(
      () => undefined,
      (err: unknown) => {
        failures += 1;
        deps.onError?.(err);
        return new Promise<void>((resolve) => setTimeout(resolve, Math.min(100 * 2 ** attempt, 5_000))).then(() => {
          waiting.unshift(entry);
          retryAttempts.set(entry.id, attempt + 1);
        });
      },
    ).finally(() => {
      inFlight.delete(p);
      pump();
      settleIdle();
    });
    inFlight.add(p);
  };

  const retryAttempts = new Map<string, number>();
  const pump = () => {
    while (inFlight.size < maxInFlight && waiting.length > 0) {
      const entry = waiting.shift()!;
      const attempt = retryAttempts.get(entry.id) ?? 0;
      retryAttempts.delete(entry.id);
      send(entry, attempt);
    }
  };

  return {
    publish(entry) {
      waiting.push(entry);
      pump();
    },
    async intend(entry) {
      await deps.bus.intendAudit?.(entry).catch((err: unknown) => { failures += 1; deps.onError?.(err); });
    },
    async record(entry) {
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new AuditUnavailable('the audit bus did not accept the record in time')), deps.recordDeadlineMs ?? RECORD_DEADLINE_MS);
      });
      try {
        await Promise.race([deps.bus.publishAudit(entry), deadline]);
      } catch (err) {
        failures += 1;
        deps.onError?.(err);
        throw err instanceof AuditUnavailable ? err : new AuditUnavailable('the audit bus refused the record');
      } finally {
        clearTimeout(timer);
      }
    },
    flush() {
      if (waiting.length === 0 && inFlight.size === 0) return Promise.resolve();
      return new Promise((resolve) => idle.push(resolve));
    },
    get failures() { return failures; },
  };
}
