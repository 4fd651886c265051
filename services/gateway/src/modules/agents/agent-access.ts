import { and, eq } from 'drizzle-orm';
import { z } from 'zod';
import { ApiError, schema, type Database } from '@portcullis/core';

export type AgentRow = typeof schema.agents.$inferSelect;
export type MemberRow = typeof schema.members.$inferSelect;

/** What a signed-in user is to one agent. */
export interface AgentAccess {
  agent: AgentRow;
  /** The user's membership, whatever its status; undefined for an outsider (never returned: see below). */
  membership: MemberRow;
  isOwner: boolean;
  isApproved: boolean;
}

/** Path parameter `:id` (and friends): a UUID, else 400 before anything is looked up. */
export const agentIdParams = z.strictObject({ id: z.string().uuid('must be a UUID') });

/**
 * Loads the agent and the caller's membership. An outsider — no membership, or a rejected
 * one — gets the same 404 as for an agent that does not exist, so nobody learns which agents exist.
 */
export async function loadAgentAccess(db: Database, agentId: string, userId: string): Promise<AgentAccess> {
  const [row] = await db
    .select({ agent: schema.agents, membership: schema.members })
    .from(schema.agents)
    .innerJoin(schema.members, and(eq(schema.members.agentId, schema.agents.id), eq(schema.members.userId, userId)))
    .where(eq(schema.agents.id, agentId))
    .limit(1);
  if (!row || row.membership.status === 'rejected') throw new ApiError('not_found', 'Agent not found.');
  return {
    agent: row.agent,
    membership: row.membership,
    isOwner: row.membership.role === 'owner' && row.membership.status === 'approved',
    isApproved: row.membership.status === 'approved',
  };
}

/** Owner-only routes: approved members and pending members get 403 (they know the agent exists). */
export function requireOwner(access: AgentAccess): void {
  if (!access.isOwner) throw new ApiError('forbidden', 'Only an owner of this agent can do that.');
}

/** Routes for approved members (and owners); a pending member gets 403. */
export function requireApproved(access: AgentAccess): void {
  if (!access.isApproved) throw new ApiError('forbidden', 'Your membership of this agent is still pending approval.');
}
