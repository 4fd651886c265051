import { and, asc, count, desc, eq, ilike, inArray, or, sql, type SQL } from 'drizzle-orm';
import { keysAndConnectionsOf } from '../members/member-keys-and-connections.ts';
import { schema, type Database } from '@portcullis/core';
import type { AgentRow, MemberRow } from './agent-access.ts';

const { agents, members, policies } = schema;

export type AgentSortKey = 'name' | 'createdAt' | 'status';

/** The filters, order and page of `GET /api/agents`, already validated. */
export interface AgentListQuery {
  search?: string | undefined;
  status?: 'active' | 'disabled' | undefined;
  role?: 'owner' | 'member' | undefined;
  sortBy: AgentSortKey;
  sortDir: 'asc' | 'desc';
  limit: number;
  offset: number;
}

/** An agent together with the caller's own membership of it. */
export interface AgentWithMembership { agent: AgentRow; membership: MemberRow }

/** The per-agent and per-caller facts a list item adds to its two rows. */
export interface AgentFacts {
  memberCount: Map<string, number>;
  policyCount: Map<string, number>;
  /** By member id: that member's newest unrevoked key. */
  currentKey: Map<string, { id: string; displaySuffix: string; lastUsedAt: Date | null }>;
  /** By member id: that member's connections, in service order. */
  connections: Map<string, Array<{ service: string; identityInfo: Record<string, unknown>; status: 'active' | 'needs_reauth' }>>;
}

/** `%`, `_` and `\` in a search string are literal characters, not LIKE wildcards. */
export function likePattern(search: string): string {
  return `%${search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/**
 * Queries behind the agents API. Every method costs a fixed number of statements, whatever
 * the number of agents on the page: a list is one count, one page and four batched look-ups.
 */
export function createAgentRepo(db: Database) {
  /** The caller's visible agents (owner or member, pending included, rejected never). */
  function visibleTo(userId: string, query: Pick<AgentListQuery, 'search' | 'status' | 'role'>): SQL {
    const conditions: SQL[] = [eq(members.userId, userId), inArray(members.status, ['pending', 'approved'])];
    if (query.status) conditions.push(eq(agents.status, query.status));
    if (query.role) conditions.push(eq(members.role, query.role));
    if (query.search) {
      const pattern = likePattern(query.search);
      conditions.push(or(
        ilike(agents.name, pattern),
        sql`exists (select 1 from jsonb_array_elements_text(${agents.tags}) as t(tag) where t.tag ilike ${pattern})`,
      )!);
    }
    return and(...conditions)!;
  }

  function orderOf(query: Pick<AgentListQuery, 'sortBy' | 'sortDir'>): SQL[] {
    const dir = query.sortDir === 'asc' ? asc : desc;
    switch (query.sortBy) {
      // Case-insensitive first, so "alpha" and "Beta" sort as a person expects; then exact.
      case 'name': return [dir(sql`lower(${agents.name})`), dir(agents.name), desc(agents.createdAt), asc(agents.id)];
      case 'status': return [dir(agents.status), desc(agents.createdAt), asc(agents.id)];
      case 'createdAt': return [dir(agents.createdAt), asc(agents.id)];
    }
  }

  return {
    async listVisible(userId: string, query: AgentListQuery): Promise<{ rows: AgentWithMembership[]; total: number }> {
      const where = visibleTo(userId, query);
      const [[counted], rows] = await Promise.all([
        db.select({ total: count() }).from(agents).innerJoin(members, eq(members.agentId, agents.id)).where(where),
        db.select({ agent: agents, membership: members })
          .from(agents)
          .innerJoin(members, eq(members.agentId, agents.id))
          .where(where)
          .orderBy(...orderOf(query))
          .limit(query.limit)
          .offset(query.offset),
      ]);
      return { rows, total: Number(counted?.total ?? 0) };
    },

    /** Member counts, policy counts, the callers' keys and connections for a page of agents: four statements. */
    async factsOf(rows: AgentWithMembership[]): Promise<AgentFacts> {
      const facts: AgentFacts = { memberCount: new Map(), policyCount: new Map(), currentKey: new Map(), connections: new Map() };
      if (rows.length === 0) return facts;
      const agentIds = rows.map((r) => r.agent.id);
      const memberIds = rows.map((r) => r.membership.id);
      const [memberCounts, policyCounts, perMember] = await Promise.all([
        db.select({ agentId: members.agentId, n: count() }).from(members)
          .where(and(inArray(members.agentId, agentIds), eq(members.status, 'approved')))
          .groupBy(members.agentId),
        db.select({ agentId: policies.agentId, n: count() }).from(policies)
          .where(inArray(policies.agentId, agentIds))
          .groupBy(policies.agentId),
        keysAndConnectionsOf(db, memberIds),
      ]);
      for (const r of memberCounts) facts.memberCount.set(r.agentId, Number(r.n));
      for (const r of policyCounts) facts.policyCount.set(r.agentId, Number(r.n));
      facts.currentKey = perMember.currentKey;
      facts.connections = perMember.connections;
      return facts;
    },

    /** Creates the agent and its owner's membership (approved) in one transaction. */
    async createWithOwner(input: { name: string; tags: string[]; type: 'standard' | 'trusted'; userId: string; email: string }): Promise<AgentWithMembership> {
      return db.transaction(async (tx) => {
        const [agent] = await tx.insert(agents).values({ name: input.name, tags: input.tags, type: input.type, createdBy: input.userId }).returning();
        const [membership] = await tx.insert(members).values({
          agentId: agent!.id, userId: input.userId, email: input.email, role: 'owner', status: 'approved', approvedAt: new Date(),
        }).returning();
        return { agent: agent!, membership: membership! };
      });
    },

    /**
     * Applies a change to the agent row (with `bumpPolicyVersion`, also `policy_version + 1`,
     * in the same statement); undefined when the agent is gone (deleted concurrently).
     */
    async update(agentId: string, change: Partial<Pick<AgentRow, 'name' | 'tags' | 'status' | 'allowedServices' | 'defaultDecision'>>, options: { bumpPolicyVersion?: boolean } = {}): Promise<AgentRow | undefined> {
      const [row] = await db.update(agents).set({
        ...change,
        ...(options.bumpPolicyVersion ? { policyVersion: sql`${agents.policyVersion} + 1` } : {}),
        updatedAt: new Date(),
      }).where(eq(agents.id, agentId)).returning();
      return row;
    },

    /**
     * Deletes the agent; members, keys, connections, policies, versions and invites go with it
     * (FK cascades). Its approved owners are recorded first, in the same transaction, so they
     * keep reading its audit entries (decision 023).
     */
    async delete(agentId: string): Promise<boolean> {
      return db.transaction(async (tx) => {
        await tx.insert(schema.deletedAgentOwners)
          .select(tx.select({ agentId: members.agentId, userId: members.userId, agentName: agents.name, deletedAt: sql`now()`.as('deleted_at') })
            .from(members).innerJoin(agents, eq(agents.id, members.agentId))
            .where(and(eq(members.agentId, agentId), eq(members.role, 'owner'), eq(members.status, 'approved'))))
          .onConflictDoNothing();
        const deleted = await tx.delete(agents).where(eq(agents.id, agentId)).returning({ id: agents.id });
        return deleted.length > 0;
      });
    },
  };
}

export type AgentRepo = ReturnType<typeof createAgentRepo>;
