import { randomUUID } from 'node:crypto';
import { and, count, desc, eq, getTableColumns, inArray, lt, sql, type SQL } from 'drizzle-orm';
import { schema, type Bus, type Database } from '@portcullis/core';

const { toolSessions, members } = schema;

export type ToolSessionRow = typeof toolSessions.$inferSelect;
/**
 * Why a session ended: `client` (DELETE /mcp), `reset` (an owner or the member), `expired`
 * (idle), `key_rotated` / `key_revoked` (its member key was replaced or revoked — rejecting a
 * member revokes theirs), `member_removed` (decision 017).
 */
export type SessionEndReason = 'client' | 'reset' | 'expired' | 'key_rotated' | 'key_revoked' | 'member_removed';

/** A session ended inside a transaction, to announce once it committed. */
export interface EndedSession { sessionId: string; agentId: string }

/**
 * Ends, inside the caller's transaction, every live tool session opened with one of `keyIds`:
 * they list as ended at once, and their next request is 404 on every replica. Whoever revokes
 * or deletes keys calls this in the same transaction, then `announceEndedSessions` after it
 * commits, so the sessions' counters start fresh.
 */
export async function endSessionsOfKeys(tx: Pick<Database, 'update'>, keyIds: readonly string[], reason: SessionEndReason, at: Date): Promise<EndedSession[]> {
  if (keyIds.length === 0) return [];
  return tx.update(toolSessions)
    .set({ status: 'terminated', endedAt: at, endReason: reason })
    .where(and(inArray(toolSessions.keyId, [...keyIds]), eq(toolSessions.status, 'active')))
    .returning({ sessionId: toolSessions.id, agentId: toolSessions.agentId });
}

/**
 * Inside the transaction that deletes a member's row: their sessions keep the member's e-mail,
 * so owners still list them and read their activity, as the audit entries that name them stay
 * (decision 071). Call it after `endSessionsOfKeys`.
 */
export async function keepSessionsOfRemovedMember(tx: Pick<Database, 'update'>, memberId: string, email: string): Promise<void> {
  await tx.update(toolSessions).set({ memberEmail: email }).where(eq(toolSessions.memberId, memberId));
}

/** Publishes `session.ended` for sessions `endSessionsOfKeys` ended (their counters are dropped). */
export function announceEndedSessions(bus: Pick<Bus, 'publishChange'>, ended: readonly EndedSession[]): void {
  for (const { sessionId, agentId } of ended) bus.publishChange({ kind: 'session.ended', sessionId, agentId });
}

/** A session as the API shows it; `expired` is an active session idle past the window. */
export interface ToolSessionView {
  id: string;
  agentId: string;
  memberId: string;
  memberEmail: string;
  keyId: string;
  clientName: string;
  clientVersion: string;
  protocolVersion: string;
  status: 'active' | 'expired' | 'terminated';
  createdAt: string;
  lastSeenAt: string;
  endedAt: string | null;
  endReason: string | null;
}

export interface SessionListQuery {
  memberId?: string;
  status?: ToolSessionView['status'];
  limit: number;
  offset: number;
}

/**
 * A stateless (2026-07-28) client's stream (decision 032): its member key, the client name its
 * `_meta` names and its optional session handle. The stream's calls form one session until it
 * ends (reset, idle expiry, its key or member going); its next call then opens a new one.
 */
export interface StatelessStream extends Pick<ToolSessionRow, 'agentId' | 'memberId' | 'keyId' | 'clientName' | 'clientVersion' | 'protocolVersion'> {
  /** `''` when the client named no handle. */
  handle: string;
}

export interface SessionRegistry {
  /** Records a new session (at `initialize`) and returns it. */
  open(session: Pick<ToolSessionRow, 'id' | 'agentId' | 'memberId' | 'keyId' | 'clientName' | 'clientVersion' | 'protocolVersion'>): Promise<void>;
  /** The live session `id`, or undefined when unknown, ended or idle past the window (then it is ended as `expired`). */
  findLive(id: string): Promise<ToolSessionRow | undefined>;
  /**
   * The live session of a stateless stream, opened when it has none: one per stream across
   * replicas (a unique index decides a race). Served from memory once known.
   */
  streamSession(stream: StatelessStream): Promise<ToolSessionRow>;
  /** Notes a request on the session; written in batches. */
  touch(id: string): void;
  /** Ends a live session (idempotent); announces it so its counters start fresh. Returns whether it was live. */
  end(id: string, reason: SessionEndReason): Promise<boolean>;
  get(agentId: string, id: string): Promise<ToolSessionView | undefined>;
  list(agentId: string, query: SessionListQuery): Promise<{ sessions: ToolSessionView[]; total: number }>;
  flush(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Tool sessions shared by every gateway replica through Postgres: any replica answers any
 * request of a live session, and ending one (reset, DELETE, expiry) is seen by the next
 * request on every replica, since each request reads the row. `lastSeenAt` is kept in memory
 * and written every `flushMs`, so a request costs one indexed read and no write.
 */
export function createSessionRegistry(deps: {
  db: Database;
  bus: Pick<Bus, 'publishChange' | 'onChange'>;
  idleMs: number;
  flushMs?: number;
  /** How long a live session read from Postgres is served from memory without a change event (the safety net). */
  cacheTtlMs?: number;
  now?: () => number;
}): SessionRegistry {
  const now = deps.now ?? Date.now;
  const seen = new Map<string, Date>();
  const timer = setInterval(() => { pruneLive(); void flush(); }, deps.flushMs ?? 5_000);
  timer.unref();

  // Live sessions this replica has read, so a request costs no database read. Ending a session
  // anywhere publishes `session.ended` (and revoking a key `key.revoked`, deleting an agent
  // `agent.changed`), which drops it here at once; the TTL only bounds a missed event.
  const cacheTtlMs = deps.cacheTtlMs ?? 10_000;
  const live = new Map<string, { row: ToolSessionRow; loadedAt: number }>();
  const unsubscribe = deps.bus.onChange((event) => {
    if (event.kind === 'session.ended') { live.delete(event.sessionId); return; }
    if (event.kind !== 'key.revoked' && event.kind !== 'agent.changed') return;
    for (const [id, { row }] of live) {
      if (event.kind === 'key.revoked' ? row.keyId === event.keyId : row.agentId === event.agentId) live.delete(id);
    }
  });

  /** Drops cached sessions past the TTL (they would be read again anyway), so abandoned ones do not pile up. */
  function pruneLive(): void {
    const cutoff = now() - cacheTtlMs;
    for (const [id, { loadedAt }] of live) if (loadedAt < cutoff) live.delete(id);
  }

  async function load(id: string): Promise<ToolSessionRow | undefined> {
    const [row] = await deps.db.select().from(toolSessions).where(eq(toolSessions.id, id)).limit(1);
    if (!row || row.status !== 'active') { live.delete(id); return undefined; }
    live.set(id, { row, loadedAt: now() });
    return row;
  }

  const lastSeenOf = (row: ToolSessionRow) => Math.max(row.lastSeenAt.getTime(), seen.get(row.id)?.getTime() ?? 0);
  const statusOf = (row: ToolSessionRow): ToolSessionView['status'] =>
    row.status === 'terminated' ? 'terminated' : lastSeenOf(row) < now() - deps.idleMs ? 'expired' : 'active';

  async function findLive(id: string): Promise<ToolSessionRow | undefined> {
    const cached = live.get(id);
    let row = cached && now() - cached.loadedAt < cacheTtlMs ? cached.row : await load(id);
    if (!row) return undefined;
    if (statusOf(row) === 'expired' && cached) {
      // Idle as far as this replica knows (its own touches count): another replica may have
      // served it since and flushed that, so ask Postgres before ending it.
      row = await load(id);
      if (!row) return undefined;
    }
    if (statusOf(row) === 'expired') {
      await end(id, 'expired');
      return undefined;
    }
    return row;
  }

  // Stateless streams this replica has served → their session id. A stale id (the session
  // ended) is replaced by the stream's next request; the oldest entries go past the bound.
  const streams = new Map<string, string>();
  const MAX_STREAMS = 10_000;

  async function streamSession(stream: StatelessStream): Promise<ToolSessionRow> {
    const key = JSON.stringify([stream.keyId, stream.clientName, stream.handle]);
    const known = streams.get(key);
    const current = known ? await findLive(known) : undefined;
    if (current) return current;
    const ofStream = and(eq(toolSessions.keyId, stream.keyId), eq(toolSessions.clientName, stream.clientName), eq(toolSessions.clientHandle, stream.handle), eq(toolSessions.status, 'active'));
    // A few rounds at most: the live row found may turn out expired (then ended), or another replica may insert first.
    for (let round = 0; round < 4; round++) {
      const [existing] = await deps.db.select({ id: toolSessions.id }).from(toolSessions).where(ofStream).limit(1);
      const row = existing
        ? await findLive(existing.id)
        : (await deps.db.insert(toolSessions).values({
          id: randomUUID(), agentId: stream.agentId, memberId: stream.memberId, keyId: stream.keyId, clientName: stream.clientName,
          clientVersion: stream.clientVersion, protocolVersion: stream.protocolVersion, clientHandle: stream.handle,
          createdAt: new Date(now()), lastSeenAt: new Date(now()),
        }).onConflictDoNothing().returning())[0];
      if (!row) continue;
      if (!existing) live.set(row.id, { row, loadedAt: now() });
      streams.delete(key);
      streams.set(key, row.id);
      if (streams.size > MAX_STREAMS) streams.delete(streams.keys().next().value!);
      return row;
    }
    throw new Error('No live session could be opened for the stream');
  }

  async function flush() {
    if (seen.size === 0) return;
    const batch = [...seen];
    seen.clear();
    for (const [id, at] of batch) {
      await deps.db.update(toolSessions).set({ lastSeenAt: at }).where(and(eq(toolSessions.id, id), lt(toolSessions.lastSeenAt, at))).catch(() => undefined);
    }
  }

  async function end(id: string, reason: SessionEndReason): Promise<boolean> {
    const [ended] = await deps.db.update(toolSessions)
      .set({ status: 'terminated', endedAt: new Date(now()), endReason: reason })
      .where(and(eq(toolSessions.id, id), eq(toolSessions.status, 'active')))
      .returning({ agentId: toolSessions.agentId });
    seen.delete(id);
    live.delete(id);
    if (ended) deps.bus.publishChange({ kind: 'session.ended', sessionId: id, agentId: ended.agentId });
    return Boolean(ended);
  }

  const view = (row: ToolSessionRow & { memberEmail: string }): ToolSessionView => ({
    id: row.id, agentId: row.agentId, memberId: row.memberId, memberEmail: row.memberEmail, keyId: row.keyId,
    clientName: row.clientName, clientVersion: row.clientVersion, protocolVersion: row.protocolVersion,
    status: statusOf(row), createdAt: row.createdAt.toISOString(), lastSeenAt: new Date(lastSeenOf(row)).toISOString(),
    endedAt: row.endedAt?.toISOString() ?? null, endReason: row.endReason ?? (statusOf(row) === 'expired' ? 'expired' : null),
  });

  // A removed member's sessions stay (decision 071): their e-mail was kept on the session.
  const withEmail = { ...getTableColumns(toolSessions), memberEmail: sql<string>`coalesce(${members.email}, ${toolSessions.memberEmail}, '')` };

  return {
    async open(session) {
      const [row] = await deps.db.insert(toolSessions).values({ ...session, createdAt: new Date(now()), lastSeenAt: new Date(now()) }).returning();
      if (row) live.set(row.id, { row, loadedAt: now() });
    },
    findLive,
    streamSession,
    touch(id) {
      seen.set(id, new Date(now()));
    },
    end,
    async get(agentId, id) {
      const [row] = await deps.db.select(withEmail).from(toolSessions).leftJoin(members, eq(members.id, toolSessions.memberId))
        .where(and(eq(toolSessions.agentId, agentId), eq(toolSessions.id, id))).limit(1);
      return row ? view(row) : undefined;
    },
    async list(agentId, query) {
      const idleCutoff = new Date(now() - deps.idleMs);
      const conditions: SQL[] = [eq(toolSessions.agentId, agentId)];
      if (query.memberId) conditions.push(eq(toolSessions.memberId, query.memberId));
      if (query.status === 'terminated') conditions.push(eq(toolSessions.status, 'terminated'));
      if (query.status === 'active') conditions.push(eq(toolSessions.status, 'active'), sql`${toolSessions.lastSeenAt} >= ${idleCutoff}`);
      if (query.status === 'expired') conditions.push(eq(toolSessions.status, 'active'), lt(toolSessions.lastSeenAt, idleCutoff));
      await flush();
      const where = and(...conditions);
      const [rows, [total]] = await Promise.all([
        deps.db.select(withEmail).from(toolSessions).leftJoin(members, eq(members.id, toolSessions.memberId))
          .where(where).orderBy(desc(toolSessions.createdAt), desc(toolSessions.id)).limit(query.limit).offset(query.offset),
        deps.db.select({ n: count() }).from(toolSessions).where(where),
      ]);
      return { sessions: rows.map(view), total: total?.n ?? 0 };
    },
    flush,
    async close() {
      clearInterval(timer);
      unsubscribe();
      await flush();
    },
  };
}
