import { and, asc, count, desc, eq, ilike, inArray, ne, or, sql, type SQL } from 'drizzle-orm';
import { ApiError, schema, type Database } from '@portcullis/core';
import { likePattern } from '../agents/agent-repo.ts';
import type { PolicyChange, PolicyContent, PolicyListQuery } from './policy-types.ts';

const { agents, members, policies, policyVersions, users } = schema;

export type PolicyRow = typeof policies.$inferSelect;
export type PolicyVersionRow = typeof policyVersions.$inferSelect;

/** A policy row with the number of its version in force. */
export interface PolicyWithVersion { policy: PolicyRow; version: number | null }

/** What one committed change produced. */
export interface CommittedChange {
  /** The policy as it now is; undefined after a delete. */
  policy: PolicyRow | undefined;
  version: PolicyVersionRow;
  /** The agent's `policy_version` after the bump. */
  policyVersion: number;
}

type Tx = Parameters<Parameters<Database['transaction']>[0]>[0];

/** Postgres `unique_violation`, whether drizzle hands it over bare or wrapped. */
function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string; cause?: { code?: string } } | null;
  return e?.code === '23505' || e?.cause?.code === '23505';
}

const keyTakenError = (policyKey: string) =>
  new ApiError('conflict', `Another policy of this agent already has the key "${policyKey}".`, { field: 'policyKey', value: policyKey });

/**
 * Queries behind the policies API. Every change runs in one transaction that locks the
 * agent row first (so an agent's changes are applied one at a time), writes the policy,
 * appends its immutable version, points `current_version_id` at it and bumps
 * `agents.policy_version`: a reader sees all of it or none of it.
 */
export function createPolicyRepo(db: Database) {
  function filtersOf(agentId: string, query: Pick<PolicyListQuery, 'search' | 'service' | 'effect' | 'enabled' | 'mode'>): SQL {
    const conditions: SQL[] = [eq(policies.agentId, agentId)];
    if (query.service !== undefined) conditions.push(eq(policies.service, query.service));
    if (query.effect !== undefined) conditions.push(eq(policies.effect, query.effect));
    if (query.enabled !== undefined) conditions.push(eq(policies.enabled, query.enabled));
    if (query.mode !== undefined) conditions.push(eq(policies.mode, query.mode));
    if (query.search) {
      const pattern = likePattern(query.search);
      conditions.push(or(ilike(policies.name, pattern), ilike(policies.policyKey, pattern))!);
    }
    return and(...conditions)!;
  }

  function orderOf(query: Pick<PolicyListQuery, 'sortBy' | 'sortDir'>): SQL[] {
    const dir = query.sortDir === 'asc' ? asc : desc;
    const tail = [desc(policies.createdAt), asc(policies.id)];
    switch (query.sortBy) {
      // Case-insensitive first, so "alpha" and "Beta" sort as a person expects; then exact.
      case 'name': return [dir(sql`lower(${policies.name})`), dir(policies.name), ...tail];
      case 'policyKey': return [dir(policies.policyKey), asc(policies.id)];
      case 'service': return [dir(policies.service), dir(sql`lower(${policies.name})`), ...tail];
      case 'effect': return [dir(policies.effect), dir(sql`lower(${policies.name})`), ...tail];
      case 'enabled': return [dir(policies.enabled), dir(sql`lower(${policies.name})`), ...tail];
      case 'createdAt': return [dir(policies.createdAt), asc(policies.id)];
      case 'updatedAt': return [dir(policies.updatedAt), asc(policies.id)];
    }
  }

  const withVersion = { policy: policies, version: policyVersions.version };

  /** Locks the agent row; every change of one agent's policies queues behind this. */
  async function lockAgent(tx: Tx, agentId: string): Promise<void> {
    const [agent] = await tx.select({ id: agents.id }).from(agents).where(eq(agents.id, agentId)).for('update');
    if (!agent) throw new ApiError('not_found', 'Agent not found.');
  }

  async function lockPolicy(tx: Tx, agentId: string, policyId: string): Promise<PolicyRow | undefined> {
    const [row] = await tx.select().from(policies).where(and(eq(policies.id, policyId), eq(policies.agentId, agentId))).for('update');
    return row;
  }

  async function assertKeyFree(tx: Tx, agentId: string, policyKey: string, exceptPolicyId: string | undefined): Promise<void> {
    const conditions = [eq(policies.agentId, agentId), eq(policies.policyKey, policyKey)];
    if (exceptPolicyId) conditions.push(ne(policies.id, exceptPolicyId));
    const [other] = await tx.select({ id: policies.id }).from(policies).where(and(...conditions)).limit(1);
    if (other) throw keyTakenError(policyKey);
  }

  /** Appends the version, points the policy at it (unless deleted) and bumps the agent's policy_version. */
  async function record(tx: Tx, input: { agentId: string; policyId: string; change: PolicyChange; snapshot: PolicyContent; cedar: string; authorUserId: string; deleted?: boolean }) {
    const [latest] = await tx.select({ n: sql<number | null>`max(${policyVersions.version})` }).from(policyVersions).where(eq(policyVersions.policyId, input.policyId));
    const [version] = await tx.insert(policyVersions).values({
      agentId: input.agentId,
      policyId: input.policyId,
      version: Number(latest?.n ?? 0) + 1,
      change: input.change,
      snapshot: { ...input.snapshot } as Record<string, unknown>,
      cedar: input.cedar,
      authorUserId: input.authorUserId,
    }).returning();
    let policy: PolicyRow | undefined;
    if (!input.deleted) {
      [policy] = await tx.update(policies).set({ currentVersionId: version!.id }).where(eq(policies.id, input.policyId)).returning();
    }
    const [agent] = await tx.update(agents).set({ policyVersion: sql`${agents.policyVersion} + 1` }).where(eq(agents.id, input.agentId)).returning({ policyVersion: agents.policyVersion });
    return { policy, version: version!, policyVersion: agent!.policyVersion };
  }

  async function inTransaction<T>(run: (tx: Tx) => Promise<T>, policyKey: string): Promise<T> {
    try {
      return await db.transaction(run);
    } catch (err) {
      // Two creates racing for one key: the loser meets the unique index.
      if (isUniqueViolation(err)) throw keyTakenError(policyKey);
      throw err;
    }
  }

  return {
    async list(agentId: string, query: PolicyListQuery): Promise<{ rows: PolicyWithVersion[]; total: number }> {
      const where = filtersOf(agentId, query);
      const [[counted], rows] = await Promise.all([
        db.select({ total: count() }).from(policies).where(where),
        db.select(withVersion).from(policies)
          .leftJoin(policyVersions, eq(policyVersions.id, policies.currentVersionId))
          .where(where)
          .orderBy(...orderOf(query))
          .limit(query.limit)
          .offset(query.offset),
      ]);
      return { rows, total: Number(counted?.total ?? 0) };
    },

    async get(agentId: string, policyId: string): Promise<PolicyWithVersion | undefined> {
      const [row] = await db.select(withVersion).from(policies)
        .leftJoin(policyVersions, eq(policyVersions.id, policies.currentVersionId))
        .where(and(eq(policies.id, policyId), eq(policies.agentId, agentId)));
      return row;
    },

    /** The agent a policy belongs to (for the un-prefixed toggle route). */
    async agentOf(policyId: string): Promise<string | undefined> {
      const [row] = await db.select({ agentId: policies.agentId }).from(policies).where(eq(policies.id, policyId));
      return row?.agentId;
    },

    /** The agent's keys equal to `base` or starting with `base-`, to pick a free derived key. */
    async keysLike(agentId: string, base: string): Promise<Set<string>> {
      const rows = await db.select({ key: policies.policyKey }).from(policies)
        .where(and(eq(policies.agentId, agentId), or(eq(policies.policyKey, base), sql`${policies.policyKey} like ${`${base.replace(/[\\%_]/g, (c) => `\\${c}`)}-%`}`)));
      return new Set(rows.map((r) => r.key));
    },

    async keyTaken(agentId: string, policyKey: string, exceptPolicyId?: string): Promise<boolean> {
      const conditions = [eq(policies.agentId, agentId), eq(policies.policyKey, policyKey)];
      if (exceptPolicyId) conditions.push(ne(policies.id, exceptPolicyId));
      const [row] = await db.select({ id: policies.id }).from(policies).where(and(...conditions)).limit(1);
      return row !== undefined;
    },

    /** Which of `ids` are members of the agent (pending or approved; rejected rows are not members). */
    async memberIdsAmong(agentId: string, ids: readonly string[]): Promise<Set<string>> {
      if (ids.length === 0) return new Set();
      const rows = await db.select({ id: members.id }).from(members)
        .where(and(eq(members.agentId, agentId), inArray(members.id, [...new Set(ids)]), inArray(members.status, ['pending', 'approved'])));
      return new Set(rows.map((r) => r.id));
    },

    /** A policy's history, newest first, with each author's e-mail; works after the policy is deleted. */
    async versions(agentId: string, policyId: string) {
      return db.select({ version: policyVersions, author: { id: users.id, email: users.email } })
        .from(policyVersions)
        .leftJoin(users, eq(users.id, policyVersions.authorUserId))
        .where(and(eq(policyVersions.agentId, agentId), eq(policyVersions.policyId, policyId)))
        .orderBy(desc(policyVersions.version));
    },

    async version(agentId: string, policyId: string, versionId: string): Promise<PolicyVersionRow | undefined> {
      const [row] = await db.select().from(policyVersions)
        .where(and(eq(policyVersions.id, versionId), eq(policyVersions.agentId, agentId), eq(policyVersions.policyId, policyId)));
      return row;
    },

    /** The Cedar text of the policy's newest version; undefined when it has none. */
    async latestCedar(policyId: string): Promise<string | undefined> {
      const [row] = await db.select({ cedar: policyVersions.cedar }).from(policyVersions)
        .where(eq(policyVersions.policyId, policyId)).orderBy(desc(policyVersions.version)).limit(1);
      return row?.cedar;
    },

    /** Inserts a policy (with `id` when a deleted one is restored) and its first version of this life. */
    async create(input: { agentId: string; id?: string; content: PolicyContent; cedar: string; authorUserId: string; change: 'create' | 'restore' }): Promise<CommittedChange> {
      return inTransaction(async (tx) => {
        await lockAgent(tx, input.agentId);
        if (input.id && await lockPolicy(tx, input.agentId, input.id)) throw new ApiError('conflict', 'The policy exists already.');
        await assertKeyFree(tx, input.agentId, input.content.policyKey, undefined);
        const [row] = await tx.insert(policies).values({
          ...(input.id ? { id: input.id } : {}), agentId: input.agentId, ...input.content, shadowSince: input.content.mode === 'shadow' ? new Date() : null,
        }).returning();
        return record(tx, { agentId: input.agentId, policyId: row!.id, change: input.change, snapshot: input.content, cedar: input.cedar, authorUserId: input.authorUserId });
      }, input.content.policyKey);
    },

    /**
     * Replaces what the policy says (update, toggle, restore). `content` may be computed from
     * the row as locked, so a toggle flips what is there, not what was read before.
     */
    async replace(input: { agentId: string; policyId: string; content: PolicyContent | ((current: PolicyRow) => PolicyContent); cedar: string; authorUserId: string; change: 'update' | 'toggle' | 'restore' | 'promote' }): Promise<CommittedChange> {
      const key = typeof input.content === 'function' ? '' : input.content.policyKey;
      return inTransaction(async (tx) => {
        await lockAgent(tx, input.agentId);
        const current = await lockPolicy(tx, input.agentId, input.policyId);
        if (!current) throw new ApiError('not_found', 'Policy not found.');
        const content = typeof input.content === 'function' ? input.content(current) : input.content;
        await assertKeyFree(tx, input.agentId, content.policyKey, input.policyId);
        const now = new Date();
        // Shadow results count from the moment the policy went into shadow; staying in shadow keeps it.
        const shadowSince = content.mode !== 'shadow' ? null : current.mode === 'shadow' ? current.shadowSince ?? now : now;
        await tx.update(policies).set({ ...content, shadowSince, updatedAt: now }).where(eq(policies.id, input.policyId));
        return record(tx, { agentId: input.agentId, policyId: input.policyId, change: input.change, snapshot: content, cedar: input.cedar, authorUserId: input.authorUserId });
      }, key);
    },

    /** Deletes the policy; its history stays, closed by a `delete` version holding its last content. */
    async remove(input: { agentId: string; policyId: string; snapshotOf: (row: PolicyRow) => PolicyContent; cedar: string; authorUserId: string }): Promise<CommittedChange> {
      return inTransaction(async (tx) => {
        await lockAgent(tx, input.agentId);
        const current = await lockPolicy(tx, input.agentId, input.policyId);
        if (!current) throw new ApiError('not_found', 'Policy not found.');
        await tx.delete(policies).where(eq(policies.id, input.policyId));
        return record(tx, { agentId: input.agentId, policyId: input.policyId, change: 'delete', snapshot: input.snapshotOf(current), cedar: input.cedar, authorUserId: input.authorUserId, deleted: true });
      }, '');
    },
  };
}

export type PolicyRepo = ReturnType<typeof createPolicyRepo>;
