import { and, eq, inArray } from 'drizzle-orm';
import { schema, type Database } from '@portcullis/core';

/**
 * What one user may read of the audit log: the one place every audit read path (the list, the
 * CSV and NDJSON export, the member list, the dashboard counters, the live stream) gets its
 * agents and its redaction from. Session activity, which is per agent, asks
 * `hidesPolicyIdentities` directly.
 */
export interface AuditScope {
  /**
   * Agents whose entries the user may read: those they own or are an approved member of, and
   * deleted agents they owned when they were deleted (decision 023).
   */
  agentIds: string[];
  /** Of `agentIds`, those that were deleted. */
  deletedAgentIds: string[];
  /**
   * Of `agentIds`, those whose policy identities the user may not see (decision 022): every
   * read answers their entries without matched policy keys, names, ids and versions and with
   * the reason stripped of policy names, and a `policy` filter never matches them.
   */
  redactPolicyAgentIds: string[];
  /** The current name of each agent of `agentIds` that still exists. */
  agentNames: Map<string, string>;
}

/**
 * The spec: "For a trusted agent, exports for non-owner members redact policy identities" —
 * extended to every read path (decision 022). The one rule, for an approved membership.
 */
export function hidesPolicyIdentities(agentType: 'standard' | 'trusted', role: 'owner' | 'member'): boolean {
  return agentType === 'trusted' && role !== 'owner';
}

const emptyScope = (): AuditScope => ({ agentIds: [], deletedAgentIds: [], redactPolicyAgentIds: [], agentNames: new Map() });

/** The audit scope of each of `userIds` (two queries, however many users). */
export async function auditScopesOf(db: Database, userIds: readonly string[]): Promise<Map<string, AuditScope>> {
  const scopes = new Map<string, AuditScope>(userIds.map((id) => [id, emptyScope()]));
  if (userIds.length === 0) return scopes;
  const ids = [...new Set(userIds)];
  const [memberships, formerlyOwned] = await Promise.all([
    db.select({ userId: schema.members.userId, agentId: schema.members.agentId, role: schema.members.role, type: schema.agents.type, name: schema.agents.name })
      .from(schema.members)
      .innerJoin(schema.agents, eq(schema.agents.id, schema.members.agentId))
      .where(and(inArray(schema.members.userId, ids), eq(schema.members.status, 'approved'))),
    db.select({ userId: schema.deletedAgentOwners.userId, agentId: schema.deletedAgentOwners.agentId })
      .from(schema.deletedAgentOwners)
      .where(inArray(schema.deletedAgentOwners.userId, ids)),
  ]);
  for (const m of memberships) {
    const scope = scopes.get(m.userId)!;
    scope.agentIds.push(m.agentId);
    scope.agentNames.set(m.agentId, m.name);
    if (hidesPolicyIdentities(m.type, m.role)) scope.redactPolicyAgentIds.push(m.agentId);
  }
  for (const d of formerlyOwned) {
    const scope = scopes.get(d.userId)!;
    scope.agentIds.push(d.agentId);
    scope.deletedAgentIds.push(d.agentId);
  }
  return scopes;
}

/** The audit scope of one user. */
export async function auditScopeOf(db: Database, userId: string): Promise<AuditScope> {
  return (await auditScopesOf(db, [userId])).get(userId)!;
}
