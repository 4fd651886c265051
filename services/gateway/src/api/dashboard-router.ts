import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { and, count, eq } from 'drizzle-orm';
import { ApiError, schema, type Database } from '@portcullis/core';
import type { AuditClient } from '../clients/audit-client.ts';
import type { AuthService } from '../modules/auth/auth-service.ts';
import { requireUser } from '../plugins/session-auth.ts';
import { auditScopeOf } from '../modules/audit/audit-scope.ts';
import { auditBound, withOrderedRange } from './audit-router.ts';

/** `from` / `to` exactly as GET /api/audit takes them (ISO 8601, inclusive, `from` not after `to`). */
const rangeShape = { from: auditBound.optional(), to: auditBound.optional() };

export const dashboardStatsQuerySchema = withOrderedRange(z.strictObject(rangeShape));
export const memberStatsQuerySchema = withOrderedRange(z.strictObject({ ...rangeShape, agentId: z.guid().optional() }));

/** Policies (enabled and disabled) of the agents `userId` owns: members do not see policies (decision 012). */
async function ownedPolicyCount(db: Database, userId: string): Promise<number> {
  const [row] = await db.select({ n: count() }).from(schema.policies)
    .innerJoin(schema.members, eq(schema.members.agentId, schema.policies.agentId))
    .where(and(eq(schema.members.userId, userId), eq(schema.members.role, 'owner'), eq(schema.members.status, 'approved')));
  return Number(row?.n ?? 0);
}

/**
 * The dashboard's counters (decision 014). Everything is scoped to the caller's `AuditScope`
 * (owned or approved member, and deleted agents they owned — decision 023), exactly like GET /api/audit:
 * - GET /api/dashboard/stats → `{calls, allowed, denied, agents, policies}`: call counters from
 *   the audit service within the optional range; `agents` the visible agents that exist now; `policies`
 *   the policies of the agents the caller owns now (the range does not apply to those two).
 * - GET /api/dashboard/member-stats → `{members:[{memberId, memberName, calls, allowed, denied,
 *   lastCallAt}]}`, most calls first; `agentId` narrows to one visible agent (another id is 404
 *   `not_found`, like an agent that does not exist).
 */
export async function dashboardRoutes(fastify: FastifyInstance, options: { db: Database; auth: AuthService; audit: Pick<AuditClient, 'stats' | 'memberStats'> }) {
  const app = fastify.withTypeProvider<ZodTypeProvider>();

  app.get('/api/dashboard/stats', {
    schema: { tags: ['dashboard'], querystring: dashboardStatsQuerySchema, description: 'Aggregate counters over the caller\'s visible agents.' },
    onRequest: requireUser(options.auth),
  }, async (request) => {
    const userId = request.user!.id;
    const scope = await auditScopeOf(options.db, userId);
    const [calls, policies] = await Promise.all([
      options.audit.stats({ agentIds: scope.agentIds, from: request.query.from ?? '', to: request.query.to ?? '' }),
      ownedPolicyCount(options.db, userId),
    ]);
    const agents = scope.agentIds.length - scope.deletedAgentIds.length;
    return { calls: Number(calls.calls), allowed: Number(calls.allowed), denied: Number(calls.denied), agents, policies };
  });

  app.get('/api/dashboard/member-stats', {
    schema: { tags: ['dashboard'], querystring: memberStatsQuerySchema, description: 'Per-member activity over the caller\'s visible agents.' },
    onRequest: requireUser(options.auth),
  }, async (request) => {
    const q = request.query;
    let { agentIds } = await auditScopeOf(options.db, request.user!.id);
    if (q.agentId !== undefined) {
      if (!agentIds.includes(q.agentId)) throw new ApiError('not_found', 'Agent not found.');
      agentIds = [q.agentId];
    }
    const { members } = await options.audit.memberStats({ agentIds, from: q.from ?? '', to: q.to ?? '' });
    return {
      members: members.map((m) => ({
        memberId: m.memberId, memberName: m.memberName,
        calls: Number(m.calls), allowed: Number(m.allowed), denied: Number(m.denied), lastCallAt: m.lastCallAt,
      })),
    };
  });
}
