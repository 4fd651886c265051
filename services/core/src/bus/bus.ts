import type { AuditEntry } from '../audit-entry.ts';

/** Change events fanned out to every replica (core pub/sub, not persisted). */
export type ChangeEvent =
  | { kind: 'policy.changed'; agentId: string; policyVersion: number }
  | { kind: 'agent.changed'; agentId: string }
  | { kind: 'key.revoked'; keyId: string; agentId: string }
  /** An OAuth grant of Portcullis's own authorization server was revoked: its tokens stop (decision 053). */
  | { kind: 'grant.revoked'; grantId: string; agentId: string }
  /** A tool session ended (reset, DELETE, expiry): its session-condition counters start fresh. */
  | { kind: 'session.ended'; sessionId: string; agentId: string }
  /** A call approval was proposed or changed status (decision 063): every replica's live streams read and send it. */
  | { kind: 'approval.changed'; approvalId: string; agentId: string }
  /** A dashboard session ended (logout, revoked from the sessions list, too many MFA failures): its live streams end at once, on every replica (decision 068). */
  | { kind: 'dashboard_session.ended'; sessionId: string; userId: string };

export interface AuditConsumerOptions {
  /** Most entries handed to one `handle` call. */
  batchSize: number;
  /** Longest a partial batch waits before it is handled. */
  maxWaitMs: number;
  /**
   * Receives a batch of entries that have the audit entry's shape (`auditEntryOf`, checked once
   * by the bus); resolving acknowledges every entry, throwing redelivers them later.
   * `encoded[i]`, where the bus has it, is `batch[i]` as the JSON text it carried.
   */
  handle(batch: AuditEntry[], encoded?: Uint8Array[]): Promise<void>;
  /** Told of each message that is not a valid audit entry (it goes to the dead-letter subject). */
  onDeadLetter?(raw: string, error: string): void;
}

/**
 * The final audit entries (one per call, after the writer stored it) fanned out to one durable
 * consumer per audit sink (decision 055). NATS: stream `AUDIT_FINAL` on `audit.final.<agentId>`,
 * interest retention, consumer `sink-<sinkId>` filtered to its agent. In-process: a queue per sink.
 */
export interface SinkFeed {
  /** Durably accepts final entries; an id already accepted within the de-duplication window is stored once. */
  publish(entries: readonly AuditEntry[]): Promise<void>;
  /** Creates the sink's consumer if it does not exist: it receives the agent's entries published from then on. */
  open(sinkId: string, agentId: string): Promise<void>;
  /** Deletes the sink's consumer and whatever it had not delivered. */
  remove(sinkId: string): Promise<void>;
  /** Entries published for the sink and not yet acknowledged; undefined when it has no consumer. */
  lag(sinkId: string): Promise<number | undefined>;
  /**
   * Hands the sink's entries to `handle` one batch at a time, oldest first; the batch is
   * acknowledged when `handle` resolves and kept (not redelivered elsewhere) while it runs.
   * A throw leaves it unacknowledged: it comes back first. Run one consumer per sink at a
   * time (the audit service's sink lease) for order.
   */
  consume(sinkId: string, options: { batchSize: number; maxWaitMs: number; handle(batch: AuditEntry[]): Promise<void> }): Promise<{ stop(): Promise<void> }>;
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
  /**
   * In-process bus with its local log only (decision 070): durably notes a call about to be
   * decided, so the wait for its verdict and this sync overlap. `entry` stands for the call if
   * the process stops before any record of the same id is published (it is then published as
   * is); once it is durable, a record of that id is accepted as soon as it is written. Absent
   * on NATS, where every publish is durable on its own.
   */
  intendAudit?(entry: AuditEntry): Promise<void>;
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
  /** Final entries for the audit sinks (decision 055). */
  readonly sinkFeed: SinkFeed;
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
    case 'grant.revoked': return `${prefix}grant.revoked.${event.grantId}`;
    case 'session.ended': return `${prefix}session.ended.${event.agentId}`;
    case 'approval.changed': return `${prefix}approval.changed.${event.agentId}`;
    case 'dashboard_session.ended': return `${prefix}dashboard_session.ended.${event.userId}`;
  }
}
