import { and, eq } from 'drizzle-orm';
import { schema, type Database } from '@portcullis/core';
import type { AgentPolicySnapshot } from '../engine/prepared-set.ts';
import { PolicyServiceError } from '../errors.ts';

/** Reads what the decision point needs from Postgres. */
export interface PolicyRepo {
  /**
   * The agent's status, `policy_version`, default decision and enabled policies; undefined when there is no
   * such agent. Throws `PolicyServiceError('unavailable')` when the database fails.
   */
  loadAgentPolicies(agentId: string): Promise<AgentPolicySnapshot | undefined>;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function createPolicyRepo(db: Database): PolicyRepo {
  return {
    async loadAgentPolicies(agentId) {
      // Not a uuid: no such agent (and Postgres would reject the comparison).
      if (!UUID.test(agentId)) return undefined;
      try {
        // The version is read BEFORE the policies. Every change bumps it after writing its
        // policy rows, so at worst this labels newer policies with an older version and the
        // change event that follows reloads them; never older policies with a newer version.
        const [agent] = await db
          .select({ status: schema.agents.status, policyVersion: schema.agents.policyVersion, defaultDecision: schema.agents.defaultDecision })
          .from(schema.agents)
          .where(eq(schema.agents.id, agentId));
        if (!agent) return undefined;
        const rows = await db
          .select({
            id: schema.policies.id,
            policyKey: schema.policies.policyKey,
            name: schema.policies.name,
            service: schema.policies.service,
            effect: schema.policies.effect,
            tools: schema.policies.tools,
            tiers: schema.policies.tiers,
            principal: schema.policies.principal,
            conditions: schema.policies.conditions,
            denyMessage: schema.policies.denyMessage,
            enabled: schema.policies.enabled,
            mode: schema.policies.mode,
            currentVersionId: schema.policies.currentVersionId,
          })
          .from(schema.policies)
          .where(and(eq(schema.policies.agentId, agentId), eq(schema.policies.enabled, true)));
        return {
          agentId,
          agentStatus: agent.status,
          policyVersion: agent.policyVersion,
          // Anything but an explicit 'deny' keeps the spec's default: no forbid matched = ALLOW.
          defaultDecision: agent.defaultDecision === 'deny' ? 'deny' : 'allow',
          policies: rows,
        };
      } catch (err) {
        throw new PolicyServiceError('unavailable', 'The policy store cannot be read', { cause: err });
      }
    },
  };
}
