import type { KeyObject } from 'node:crypto';
import { and, eq, inArray } from 'drizzle-orm';
import { schema, type Database } from '@portcullis/core';
import type { MemberContext } from './member-context.ts';

const { agents, connections, members } = schema;

/** The member and agent columns every `/mcp` caller resolution reads (join `members` and `agents`). */
export const callerColumns = {
  memberId: members.id,
  memberEmail: members.email,
  memberRole: members.role,
  memberStatus: members.status,
  wrappedPrivateKey: members.vaultWrappedPrivateKey,
  agentId: agents.id,
  agentName: agents.name,
  agentStatus: agents.status,
  agentType: agents.type,
  agentPolicyVersion: agents.policyVersion,
  allowedServices: agents.allowedServices,
};

type CallerRow = { [K in keyof typeof callerColumns]: (typeof callerColumns)[K]['_']['data'] };

/**
 * The context of a resolved caller: the member and agent of `row`, the member's connections to
 * the agent's enabled connectors, and the vault key the presented credential unwrapped.
 */
export async function callerContextOf(db: Database, row: Omit<CallerRow, 'wrappedPrivateKey'> & { keyId: string }, vaultPrivateKey: KeyObject | undefined): Promise<MemberContext> {
  const memberConnections = await db
    .select()
    .from(connections)
    .where(and(eq(connections.memberId, row.memberId), inArray(connections.service, row.allowedServices.length > 0 ? row.allowedServices : [''])));
  return {
    keyId: row.keyId,
    memberId: row.memberId,
    memberEmail: row.memberEmail,
    memberRole: row.memberRole,
    memberStatus: row.memberStatus,
    agentId: row.agentId,
    agentName: row.agentName,
    agentStatus: row.agentStatus,
    agentType: row.agentType,
    agentPolicyVersion: row.agentPolicyVersion,
    allowedServices: row.allowedServices,
    connections: memberConnections.map((c) => ({
      id: c.id, service: c.service, identityInfo: c.identityInfo, sealedTokens: c.sealedTokens, status: c.status, updatedAt: c.updatedAt,
    })),
    vaultPrivateKey,
  };
}
