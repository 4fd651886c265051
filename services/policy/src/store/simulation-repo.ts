import { and, eq, inArray } from 'drizzle-orm';
import { schema, type Database, type MemberMsg } from '@portcullis/core';
import { PolicyServiceError } from '../errors.ts';

/** A stored policy of an agent, enabled or not (Simulate may replace a disabled one). */
export interface StoredPolicyRef {
  id: string;
  policyKey: string;
  name: string;
  enabled: boolean;
}

/** What Simulate reads from Postgres besides the agent's enabled policies (`PolicyRepo`). */
export interface SimulationRepo {
  /** The policy `policyId` when it belongs to `agentId`; undefined otherwise. */
  findPolicy(agentId: string, policyId: string): Promise<StoredPolicyRef | undefined>;
  /**
   * The agent's members among `memberIds`, as they are now, by id; ids that are not members
   * of the agent (or not uuids) are absent.
   */
  loadMembers(agentId: string, memberIds: readonly string[]): Promise<Map<string, MemberMsg>>;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Ids per `IN (…)`: well under Postgres's 65,535 bind parameters. */
const CHUNK = 1_000;

/** Both reads throw `PolicyServiceError('unavailable')` when the database fails. */
export function createSimulationRepo(db: Database): SimulationRepo {
  return {
    async findPolicy(agentId, policyId) {
      if (!UUID.test(agentId) || !UUID.test(policyId)) return undefined;
      try {
        const [row] = await db
          .select({ id: schema.policies.id, policyKey: schema.policies.policyKey, name: schema.policies.name, enabled: schema.policies.enabled })
          .from(schema.policies)
          .where(and(eq(schema.policies.agentId, agentId), eq(schema.policies.id, policyId)));
        return row;
      } catch (err) {
        throw new PolicyServiceError('unavailable', 'The policy store cannot be read', { cause: err });
      }
    },

    async loadMembers(agentId, memberIds) {
      const members = new Map<string, MemberMsg>();
      const ids = [...new Set(memberIds)].filter((id) => UUID.test(id));
      if (!UUID.test(agentId) || ids.length === 0) return members;
      try {
        for (let i = 0; i < ids.length; i += CHUNK) {
          const rows = await db
            .select({ id: schema.members.id, role: schema.members.role, status: schema.members.status, email: schema.members.email })
            .from(schema.members)
            .where(and(eq(schema.members.agentId, agentId), inArray(schema.members.id, ids.slice(i, i + CHUNK))));
          for (const row of rows) members.set(row.id, { id: row.id, role: row.role, status: row.status, email: row.email });
        }
      } catch (err) {
        throw new PolicyServiceError('unavailable', 'The member store cannot be read', { cause: err });
      }
      return members;
    },
  };
}
