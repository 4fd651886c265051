import { and, eq } from 'drizzle-orm';
import { ApiError, schema, type Database } from '@portcullis/core';
import type { AgentAccess, MemberRow } from '../agents/agent-access.ts';
import { keysAndConnectionsOf } from './member-keys-and-connections.ts';

const { members } = schema;

/** A member as the REST API shows it: metadata only, never a key, key digest, vault or token. */
export interface MemberView {
  id: string;
  userId: string;
  email: string;
  role: 'owner' | 'member';
  status: 'pending' | 'approved' | 'rejected';
  createdAt: string;
  approvedAt: string | null;
  /** The member's current (unrevoked) key; null when they have none. */
  key: { displaySuffix: string; lastUsedAt: string | null } | null;
  connections: Array<{ service: string; identityInfo: Record<string, unknown>; status: 'active' | 'needs_reauth' }>;
}

/** Another member as a non-owner sees them: who they are, not what they hold (decision 028). */
export type MemberSummary = Pick<MemberView, 'id' | 'email' | 'role' | 'status'>;

/**
 * The one visibility rule for member records: owners see every member in full; anyone else
 * sees their own record in full and only the name (e-mail), role and status of the others —
 * never their key suffix, key use, connections or the identities behind them.
 */
export function seesInFull(viewer: AgentAccess, memberId: string): boolean {
  return viewer.isOwner || viewer.membership.id === memberId;
}

export function memberSummaryOf(row: MemberRow): MemberSummary {
  return { id: row.id, email: row.email, role: row.role, status: row.status };
}

/** One of a member's connections, as `GET …/members/:memberId/connections` lists it. */
export interface ConnectionView {
  service: string;
  identityInfo: Record<string, unknown>;
  status: 'active' | 'needs_reauth';
  createdAt: string;
}

/** Views of `rows`, in their order: two batched look-ups (keys, connections) whatever the count. */
export async function memberViewsOf(db: Database, rows: MemberRow[]): Promise<MemberView[]> {
  if (rows.length === 0) return [];
  const { currentKey, connections: connectionsOf } = await keysAndConnectionsOf(db, rows.map((r) => r.id));
  const keyOf = (memberId: string): MemberView['key'] => {
    const k = currentKey.get(memberId);
    return k ? { displaySuffix: k.displaySuffix, lastUsedAt: k.lastUsedAt?.toISOString() ?? null } : null;
  };
  return rows.map((r) => ({
    id: r.id,
    userId: r.userId,
    email: r.email,
    role: r.role,
    status: r.status,
    createdAt: r.createdAt.toISOString(),
    approvedAt: r.approvedAt?.toISOString() ?? null,
    key: keyOf(r.id),
    connections: connectionsOf.get(r.id) ?? [],
  }));
}

export async function memberViewOf(db: Database, row: MemberRow): Promise<MemberView> {
  return (await memberViewsOf(db, [row]))[0]!;
}

/** The member `memberId` of agent `agentId`; 404 when there is none (or it belongs to another agent). */
export async function loadMemberOfAgent(db: Database, agentId: string, memberId: string): Promise<MemberRow> {
  const [row] = await db.select().from(members).where(and(eq(members.id, memberId), eq(members.agentId, agentId))).limit(1);
  if (!row) throw new ApiError('not_found', 'Member not found.');
  return row;
}

/**
 * Self-only routes (key generation, reset-lost): decided from the caller's own membership, so
 * nobody else — an owner included — learns from the answer whether `memberId` exists.
 */
export function requireSelf(access: AgentAccess, memberId: string, what: string): void {
  if (access.membership.id !== memberId) throw new ApiError('forbidden', `Only the member themself can ${what}.`);
}

/**
 * Self-or-owner routes: the caller's own membership passes; anyone else must be an owner
 * (403 otherwise, before the target is looked up), and then the target must be in the agent (404).
 */
export async function loadSelfOrOwnerTarget(db: Database, access: AgentAccess, memberId: string, what: string): Promise<MemberRow> {
  if (access.membership.id === memberId) return access.membership;
  if (!access.isOwner) throw new ApiError('forbidden', `Only the member themself or an owner of this agent can ${what}.`);
  return loadMemberOfAgent(db, access.agent.id, memberId);
}
