import { and, asc, count, desc, eq, gt, inArray, isNull, lte, or, sql, type SQL } from 'drizzle-orm';
import { schema, type Database } from '@portcullis/core';
import type { CallApprovalStatusFilter } from './call-approval-types.ts';

const { callApprovals, callApprovalMail, callApprovalReveals, members, agents } = schema;

export type CallApprovalRow = typeof callApprovals.$inferSelect;
export type CallApprovalRevealRow = typeof callApprovalReveals.$inferSelect;

/** Most open requests one member, and one agent, may have at once (decision 067). */
export interface PendingCaps { perMember: number; perAgent: number }

/** Why a proposal was not recorded: the member's or the agent's queue of open requests is full. */
export interface QueueFull { scope: 'member' | 'agent'; open: number; max: number }

/** Namespace (first key) of the advisory locks that serialise proposals of one agent (second key: its id hashed). */
const PROPOSAL_LOCK_NAMESPACE = 7_340_167;

/** What a request is bound to (decision 063): another value of any field is another request. */
export interface ApprovalBinding {
  agentId: string;
  memberId: string;
  service: string;
  tool: string;
  argsDigest: string;
  /** The matched approval policies' version ids, sorted by policy key, joined by `,`. */
  bindingVersions: string;
}

/** Most audit entry ids one request keeps (an agent retrying a held call in a loop adds one a call). */
const MAX_AUDIT_IDS = 100;
/** Most reveals one request's answer lists (the newest). */
const MAX_REVEALS = 50;

/** The effective-status condition of a list filter, at `now`: `expired` includes open requests past their expiry. */
function statusWhere(status: CallApprovalStatusFilter, now: Date): SQL {
  const t = callApprovals;
  switch (status) {
    case 'pending': return and(eq(t.status, 'pending'), gt(t.expiresAt, now))!;
    case 'approved': return and(eq(t.status, 'approved'), gt(t.expiresAt, now))!;
    case 'expired': return or(eq(t.status, 'expired'), and(inArray(t.status, ['pending', 'approved']), lte(t.expiresAt, now)))!;
    case 'denied': return eq(t.status, 'denied');
    case 'executed': return eq(t.status, 'executed');
  }
}

/** Every read and write of `call_approvals`; `now` is always the caller's clock, so replicas and tests agree. */
export function createCallApprovalRepo(db: Database) {
  const t = callApprovals;
  return {
    /** The newest request of a binding, whatever its status. */
    async newest(binding: ApprovalBinding): Promise<CallApprovalRow | undefined> {
      const [row] = await db.select().from(t).where(and(
        eq(t.agentId, binding.agentId), eq(t.memberId, binding.memberId), eq(t.service, binding.service), eq(t.tool, binding.tool),
        eq(t.argsDigest, binding.argsDigest), eq(t.bindingVersions, binding.bindingVersions),
      )).orderBy(desc(t.createdAt), desc(t.id)).limit(1);
      return row;
    },

    /**
     * Inserts a pending request unless the member's or the agent's open requests are at their
     * cap: `{inserted}`, `{full}`, or `{}` when the binding already has an open request (another
     * replica came first). Proposals of one agent take a transaction-scoped advisory lock, so
     * the count and the insert are one step on every replica: two racing at the cap never both
     * insert.
     */
    async insertPending(row: typeof callApprovals.$inferInsert, caps: PendingCaps, now: Date): Promise<{ inserted?: CallApprovalRow; full?: QueueFull }> {
      return db.transaction(async (tx) => {
        await tx.execute(sql`select pg_advisory_xact_lock(${PROPOSAL_LOCK_NAMESPACE}::int4, hashtext(${row.agentId}))`);
        const [existing] = await tx.select({ id: t.id }).from(t)
          .where(and(eq(t.agentId, row.agentId), eq(t.memberId, row.memberId), eq(t.service, row.service), eq(t.tool, row.tool),
            eq(t.argsDigest, row.argsDigest), eq(t.bindingVersions, row.bindingVersions), eq(t.status, 'pending'))).limit(1);
        if (existing) return {};
        const [open] = await tx.select({ agent: count(), member: sql<number>`count(*) filter (where ${t.memberId} = ${row.memberId})` })
          .from(t).where(and(eq(t.agentId, row.agentId), statusWhere('pending', now)));
        const member = Number(open?.member ?? 0);
        const agent = Number(open?.agent ?? 0);
        if (member >= caps.perMember) return { full: { scope: 'member' as const, open: member, max: caps.perMember } };
        if (agent >= caps.perAgent) return { full: { scope: 'agent' as const, open: agent, max: caps.perAgent } };
        const [inserted] = await tx.insert(t).values({ ...row, status: 'pending' }).onConflictDoNothing().returning();
        return inserted ? { inserted } : {};
      });
    },

    /** Spends an approval: exactly one caller gets the row, and only while the grant is live. Its sealed arguments go in the same statement. */
    async consume(id: string, now: Date): Promise<CallApprovalRow | undefined> {
      const [row] = await db.update(t).set({ status: 'executed', executedAt: now, sealedArgs: null })
        .where(and(eq(t.id, id), eq(t.status, 'approved'), gt(t.expiresAt, now))).returning();
      return row;
    },

    /** Marks open requests past their expiry `expired`, destroying their sealed arguments (one of them with `id`); each row is returned to one caller only. */
    async expireOpen(now: Date, id?: string): Promise<CallApprovalRow[]> {
      return db.update(t).set({ status: 'expired', sealedArgs: null })
        .where(and(inArray(t.status, ['pending', 'approved']), lte(t.expiresAt, now), ...(id ? [eq(t.id, id)] : []))).returning();
    },

    /** Records that the agent was told the request expired (its sealed arguments gone too); false when it already was. */
    async reportExpiry(id: string, now: Date): Promise<boolean> {
      const rows = await db.update(t).set({ expiryReportedAt: now, sealedArgs: null }).where(and(eq(t.id, id), isNull(t.expiryReportedAt))).returning({ id: t.id });
      return rows.length > 0;
    },

    /**
     * The sealed arguments of an open (pending or approved, unexpired) request of the agent,
     * opened by `open`, and a record that `viewer` read them, in one transaction (an `open` that
     * throws records nothing); `{row}` alone when they are gone (executed, denied, expired),
     * undefined when there is no such request.
     */
    async reveal<T>(agentId: string, id: string, viewer: { userId: string; email: string }, now: Date, open: (row: CallApprovalRow) => T): Promise<{ row: CallApprovalRow; opened?: T; reveal?: CallApprovalRevealRow } | undefined> {
      return db.transaction(async (tx) => {
        const [row] = await tx.select().from(t).where(and(eq(t.id, id), eq(t.agentId, agentId))).limit(1).for('share');
        if (!row) return undefined;
        const live = (row.status === 'pending' || row.status === 'approved') && row.expiresAt > now;
        if (!live || !row.sealedArgs) return { row };
        const opened = open(row);
        const [reveal] = await tx.insert(callApprovalReveals).values({ approvalId: id, userId: viewer.userId, userEmail: viewer.email, revealedAt: now }).returning();
        return { row, opened, reveal: reveal! };
      });
    },

    /** The reveals of these requests, oldest first, at most `MAX_REVEALS` newest of each. */
    async revealsOf(ids: readonly string[]): Promise<Map<string, CallApprovalRevealRow[]>> {
      const byId = new Map<string, CallApprovalRevealRow[]>();
      if (ids.length === 0) return byId;
      const rows = await db.select().from(callApprovalReveals).where(inArray(callApprovalReveals.approvalId, [...ids]))
        .orderBy(asc(callApprovalReveals.revealedAt), asc(callApprovalReveals.id));
      for (const r of rows) {
        const list = byId.get(r.approvalId) ?? [];
        list.push(r);
        if (list.length > MAX_REVEALS) list.shift();
        byId.set(r.approvalId, list);
      }
      return byId;
    },

    /**
     * An owner's decision on a pending, unexpired request of the agent: approved (usable until
     * `grantExpiresAt`) or denied (its sealed arguments destroyed in the same statement).
     * Undefined when the request is not pending any more.
     */
    async decide(agentId: string, id: string, decision: { status: 'approved' | 'denied'; reason: string | null; approverId: string; approverEmail: string; grantExpiresAt?: Date }, now: Date) {
      const [row] = await db.update(t).set({
        status: decision.status, reason: decision.reason, approverId: decision.approverId, approverEmail: decision.approverEmail, decidedAt: now,
        ...(decision.grantExpiresAt ? { expiresAt: decision.grantExpiresAt } : {}),
        // Denied: the exact arguments are never needed again (decision 067).
        ...(decision.status === 'denied' ? { sealedArgs: null } : {}),
      }).where(and(eq(t.id, id), eq(t.agentId, agentId), eq(t.status, 'pending'), gt(t.expiresAt, now))).returning();
      return row;
    },

    /** Adds an audit entry id to the request's list (bounded). */
    async addAuditEntry(id: string, entryId: string): Promise<void> {
      await db.update(t).set({ auditEntryIds: sql`${t.auditEntryIds} || ${JSON.stringify([entryId])}::jsonb` })
        .where(and(eq(t.id, id), sql`jsonb_array_length(${t.auditEntryIds}) < ${MAX_AUDIT_IDS}`));
    },

    async get(agentId: string, id: string): Promise<CallApprovalRow | undefined> {
      const [row] = await db.select().from(t).where(and(eq(t.id, id), eq(t.agentId, agentId))).limit(1);
      return row;
    },

    async byId(id: string): Promise<CallApprovalRow | undefined> {
      const [row] = await db.select().from(t).where(eq(t.id, id)).limit(1);
      return row;
    },

    /** One page of an agent's requests, newest first, and how many match. */
    async list(agentId: string, query: { status?: CallApprovalStatusFilter; limit: number; offset: number }, now: Date) {
      const where = and(eq(t.agentId, agentId), ...(query.status ? [statusWhere(query.status, now)] : []));
      const [rows, [total]] = await Promise.all([
        db.select().from(t).where(where).orderBy(desc(t.createdAt), desc(t.id)).limit(query.limit).offset(query.offset),
        db.select({ n: count() }).from(t).where(where),
      ]);
      return { rows, total: Number(total?.n ?? 0) };
    },

    /** The pending requests of every agent `userId` is an approved owner of, oldest first (the next to expire on top). */
    async pendingForOwner(userId: string, limit: number, now: Date) {
      const where = and(
        statusWhere('pending', now),
        sql`exists (select 1 from ${members} where ${members.agentId} = ${t.agentId} and ${members.userId} = ${userId} and ${members.role} = 'owner' and ${members.status} = 'approved')`,
      );
      const [rows, [total]] = await Promise.all([
        db.select().from(t).where(where).orderBy(asc(t.expiresAt), asc(t.id)).limit(limit),
        db.select({ n: count() }).from(t).where(where),
      ]);
      return { rows, total: Number(total?.n ?? 0) };
    },

    /** The agent's name and its approved owners' e-mails (mail and audit entries of owner decisions). */
    async agentAndOwners(agentId: string): Promise<{ agentName: string; ownerEmails: string[] } | undefined> {
      const [agent] = await db.select({ name: agents.name }).from(agents).where(eq(agents.id, agentId)).limit(1);
      if (!agent) return undefined;
      const owners = await db.select({ email: members.email }).from(members)
        .where(and(eq(members.agentId, agentId), eq(members.role, 'owner'), eq(members.status, 'approved')));
      return { agentName: agent.name, ownerEmails: owners.map((o) => o.email) };
    },

    /**
     * Claims the agent's mail slot: true when no mail went out for it since `cutoff` (and
     * records `now`), false when one did. One statement, so replicas agree.
     */
    async claimMailSlot(agentId: string, now: Date, cutoff: Date): Promise<boolean> {
      const rows = await db.insert(callApprovalMail).values({ agentId, lastSentAt: now })
        .onConflictDoUpdate({ target: callApprovalMail.agentId, set: { lastSentAt: now }, setWhere: lte(callApprovalMail.lastSentAt, cutoff) })
        .returning({ agentId: callApprovalMail.agentId });
      return rows.length > 0;
    },
  };
}

export type CallApprovalRepo = ReturnType<typeof createCallApprovalRepo>;
