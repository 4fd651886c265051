import type { AuditEntry } from '../audit-entry.ts';

/** Change events fanned out to every replica (core pub/sub, not persisted). */
export type ChangeEvent =
  | { kind: 'policy.changed'; agentId: string; policyVersion: number }
  | { kind: 'agent.changed'; agentId: string }
  | { kind: 'key.revoked'; keyId: string; agentId: string }
  /** A tool session ended (reset, DELETE, expiry): its session-condition counters start fresh. */
  | { kind: 'session.ended'; sessionId: string; agentId: string };

export interface AuditConsumerOptions {
  /** Most entries handed to one `handle` call. */
  batchSize: number;
  /** Longest a partial batch waits before it is handled. */
  maxWaitMs: number;
  /** Receives a batch; resolving acknowledges every entry, throwing redelivers them later. */
  handle(batch: AuditEntry[]): Promise<void>;
  /** Told of each message that is not a valid audit entry (it goes to the dead-letter subject). */
  onDeadLetter?(raw: string, error: string): void;
}

export interface AuditConsumer {
  /** Handles everything already accepted, then stops. */
  drain(): Promise<void>;
  stop(): Promise<void>;
}

/** One key of a `KeyValueBucket`: its value and the revision a compare-and-set must name. */
export interface KeyValueEntry { value: string; revision: number }

/**
 * A key-value bucket with compare-and-set: JetStream KV on NATS (every replica sees the same
 * keys), a map for the in-process bus. Keys are `[-/_=.A-Za-z0-9]+`.
 */
export interface KeyValueBucket {
  get(key: string): Promise<KeyValueEntry | undefined>;
  /** Writes `value` if `key` is still at `revision` (`0`: the key must not exist); false when another writer came first. */
  compareAndSet(key: string, value: string, revision: number): Promise<boolean>;
  delete(key: string): Promise<void>;
}

/**
 * The message bus between services: NATS JetStream in split and cluster modes, an
 * in-process queue with the same contract when `NATS_URL` is unset.
 */
export interface Bus {
  readonly kind: 'nats' | 'memory';
  /** Durably accepts an entry on `audit.entries.<agentId>`; a repeated id is stored once. */
  publishAudit(entry: AuditEntry): Promise<void>;
  /** Starts a writer on the shared durable consumer (several writers split the stream). */
  consumeAudit(options: AuditConsumerOptions): Promise<AuditConsumer>;
  /**
   * A live, non-durable view of the audit entries published from now on, on every replica
   * (NATS: a core subscription on `audit.entries.>`, beside the durable consumer). Nothing is
   * replayed, nothing is acknowledged, and an entry published twice (a retried publish, or
   * the `decision` and `complete` stages of one call) reaches the handler each time: callers
   * de-duplicate by id. Returns the unsubscribe function.
   */
  onAuditEntry(handler: (entry: AuditEntry) => void): () => void;
  /** Opens (creating if needed) the bucket `name`; keys not written for `ttlMs` are forgotten. */
  keyValue(name: string, options: { ttlMs: number }): Promise<KeyValueBucket>;
  publishChange(event: ChangeEvent): void;
  onChange(handler: (event: ChangeEvent) => void): () => void;
  ping(): Promise<void>;
  close(): Promise<void>;
}

/**
 * The de-duplication key of an audit message: the entry id and its stage, so a call's
 * `decision` record and its `complete` record are both kept while a repeat of either is not.
 */
export function auditMessageId(entry: Pick<AuditEntry, 'id' | 'stage'>): string {
  return `${entry.id}:${entry.stage ?? 'complete'}`;
}

export function changeSubject(prefix: string, event: ChangeEvent): string {
  switch (event.kind) {
    case 'policy.changed': return `${prefix}policy.changed.${event.agentId}`;
    case 'agent.changed': return `${prefix}agent.changed.${event.agentId}`;
    case 'key.revoked': return `${prefix}key.revoked.${event.keyId}`;
    case 'session.ended': return `${prefix}session.ended.${event.agentId}`;
  }
}
