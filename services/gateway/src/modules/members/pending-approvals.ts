import { and, asc, count, eq, sql } from 'drizzle-orm';
import { alias } from 'drizzle-orm/pg-core';
import { schema, type Database } from '@portcullis/core';

const { agents, invites, members } = schema;

/** Most pending requests one answer lists; `total` counts them all. */
export const PENDING_APPROVALS_LISTED = 100;

/** A request to join that waits for the caller's approval. */
export interface PendingApproval {
  agentId: string;
  agentName: string;
  memberId: string;
  email: string;
  /** When they asked (ISO 8601): the join, or the membership's creation where no invite records it. */
  requestedAt: string;
}

/**
 * The pending members of the agents `userId` owns (an approved owner: the people who can
 * approve them), oldest first, optionally of one agent only. Members never see others'
 * pending requests here: approving is an owner's job (decision 005).
 */
export async function pendingApprovalsOf(db: Database, userId: string, agentId?: string): Promise<{ total: number; members: PendingApproval[] }> {
  const owner = alias(members, 'owner');
  const where = and(
    eq(members.status, 'pending'),
    ...(agentId !== undefined ? [eq(members.agentId, agentId)] : []),
  );
  // A request reopened after a rejection keeps its membership row: the newest join is the invite it consumed.
  const requestedAt = sql<Date>`coalesce((select max(${invites.consumedAt}) from ${invites} where ${invites.memberId} = ${members.id}), ${members.createdAt})`;
  const ownedBy = and(eq(owner.agentId, members.agentId), eq(owner.userId, userId), eq(owner.role, 'owner'), eq(owner.status, 'approved'));
  const [[counted], rows] = await Promise.all([
    db.select({ n: count() }).from(members).innerJoin(owner, ownedBy).where(where),
    db.select({ agentId: members.agentId, agentName: agents.name, memberId: members.id, email: members.email, requestedAt })
      .from(members)
      .innerJoin(owner, ownedBy)
      .innerJoin(agents, eq(agents.id, members.agentId))
      .where(where)
      .orderBy(asc(requestedAt), asc(members.id))
      .limit(PENDING_APPROVALS_LISTED),
  ]);
  return {
    total: Number(counted?.n ?? 0),
    members: rows.map((r) => ({ agentId: r.agentId, agentName: r.agentName, memberId: r.memberId, email: r.email, requestedAt: new Date(r.requestedAt).toISOString() })),
  };
}
