import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { and, count, eq } from 'drizzle-orm';
import { ApiError, schema, type Database } from '@portcullis/core';
import type { AuditClient } from '../clients/audit-client.ts';
import type { AuthService } from '../modules/auth/auth-service.ts';
import { requireUser } from '../plugins/session-auth.ts';
import type { WorkGates } from '../plugins/work-gates.ts';
import { auditScopeOf, type AuditScope } from '../modules/audit/audit-scope.ts';
import { pendingApprovalsOf } from '../modules/members/pending-approvals.ts';
import { auditBound, histogramSchema, toApiHistogram, withOrderedRange } from './audit-router.ts';

/** `from` / `to` exactly as GET /api/audit takes them (ISO 8601, inclusive, `from` not after `to`). */
const rangeShape = { from: auditBound.optional(), to: auditBound.optional() };

export const dashboardStatsQuerySchema = withOrderedRange(z.strictObject(rangeShape));
export const memberStatsQuerySchema = withOrderedRange(z.strictObject({ ...rangeShape, agentId: z.guid().optional() }));
export const overviewQuerySchema = withOrderedRange(z.strictObject({
  ...rangeShape,
  agentId: z.guid().optional(),
  top: z.coerce.number().int().min(1).max(50).default(10),
}));

const statsSchema = z.object({
  calls: z.number().int().describe('Tool calls (audit entries other than protocol requests and approval events, decision 071) of the visible agents within the range'),
  allowed: z.number().int(),
  denied: z.number().int(),
  agents: z.number().int().describe('Visible agents that exist now (the range does not apply)'),
  policies: z.number().int().describe('Policies of the agents the caller owns now (the range does not apply)'),
});

const memberStatsSchema = z.object({
  members: z.array(z.object({
    memberId: z.string().describe('The audit `member` filter'), memberName: z.string(),
    calls: z.number().int(), allowed: z.number().int(), denied: z.number().int(),
    lastCallAt: z.string().describe('ISO 8601'),
  })).describe('Most calls first'),
});

const pendingApprovalsSchema = z.object({
  total: z.number().int().describe('Pending requests to join the agents the caller owns'),
  members: z.array(z.object({
    agentId: z.string(), agentName: z.string(), memberId: z.string(), email: z.string(),
    requestedAt: z.string().describe('ISO 8601'),
  })).describe('Oldest first, at most 100'),
});

const overviewSchema = z.object({
  series: histogramSchema.describe('Tool calls and denies per time bucket, counted as GET /api/dashboard/stats counts calls (decision 071)'),
  totals: z.object({ calls: z.number().int(), denies: z.number().int() }),
  topDeniedTools: z.array(z.object({ service: z.string(), tool: z.string(), denies: z.number().int() })),
  topDeniedPolicies: z.array(z.object({
    policyId: z.string().describe('Database id: the audit `policy` filter'),
    policyKey: z.string(), name: z.string(), agentId: z.string(), agentName: z.string(), denies: z.number().int(),
  })).describe('None of an agent whose policy identities the caller may not see (decision 022)'),
  memberDenyRates: z.array(z.object({
    memberId: z.string().describe('The audit `member` filter'), memberName: z.string(),
    agentId: z.string().describe('The agent of the membership (a member id is one person on one agent)'), agentName: z.string(),
    calls: z.number().int(), denies: z.number().int(),
    denyRate: z.number().describe('denies / calls, 0..1'),
  })).describe('Most denies first'),
  agentsWithErrors: z.array(z.object({
    agentId: z.string(), agentName: z.string(),
    errors: z.number().int().describe('Entries whose upstream call failed'),
    lastErrorAt: z.string().describe('ISO 8601'),
  })),
  pendingApprovals: pendingApprovalsSchema,
});

/** `scope`, or its part for `agentId` when given: 404 `not_found` for an agent the caller cannot see (as for one that does not exist). */
function narrowed(scope: AuditScope, agentId: string | undefined): AuditScope {
  if (agentId === undefined) return scope;
  if (!scope.agentIds.includes(agentId)) throw new ApiError('not_found', 'Agent not found.');
  const only = (ids: string[]) => ids.filter((id) => id === agentId);
  return { agentIds: [agentId], deletedAgentIds: only(scope.deletedAgentIds), redactPolicyAgentIds: only(scope.redactPolicyAgentIds), agentNames: scope.agentNames };
}

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
 *   the audit service within the optional range (one definition of a call for every counter,
 *   decision 071); `agents` the visible agents that exist now; `policies` the policies of the
 *   agents the caller owns now, as the agent list's `policyCount` (the range does not apply to those two).
 * - GET /api/dashboard/member-stats → `{members:[{memberId, memberName, calls, allowed, denied,
 *   lastCallAt}]}`, most calls first; `agentId` narrows to one visible agent (another id is 404
 *   `not_found`, like an agent that does not exist).
 * - GET /api/dashboard/overview and GET /api/dashboard/pending-approvals: the home overview and
 *   the pending badge (decision 037).
 */
export async function dashboardRoutes(fastify: FastifyInstance, options: { db: Database; auth: AuthService; audit: Pick<AuditClient, 'stats' | 'memberStats' | 'overview'>; gates: Pick<WorkGates, 'reads'> }) {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  // Turns per user and agent (decision 069).
  const preHandler = options.gates.reads.hook((request) => ({ userId: request.user!.id, agentId: (request.query as { agentId?: string }).agentId }));

  app.get('/api/dashboard/stats', {
    schema: { tags: ['dashboard'], querystring: dashboardStatsQuerySchema, response: { 200: statsSchema }, description: 'Aggregate counters over the caller\'s visible agents.' },
    onRequest: requireUser(options.auth),
    preHandler,
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
    schema: { tags: ['dashboard'], querystring: memberStatsQuerySchema, response: { 200: memberStatsSchema }, description: 'Per-member activity over the caller\'s visible agents.' },
    onRequest: requireUser(options.auth),
    preHandler,
  }, async (request) => {
    const q = request.query;
    const { agentIds } = narrowed(await auditScopeOf(options.db, request.user!.id), q.agentId);
    const { members } = await options.audit.memberStats({ agentIds, from: q.from ?? '', to: q.to ?? '' });
    return {
      members: members.map((m) => ({
        memberId: m.memberId, memberName: m.memberName,
        calls: Number(m.calls), allowed: Number(m.allowed), denied: Number(m.denied), lastCallAt: m.lastCallAt,
      })),
    };
  });

  /**
   * The home overview (decision 037), computed by the audit service over every agent the
   * caller can see (or `agentId`), with the pending requests to join their owned agents.
   */
  app.get('/api/dashboard/overview', {
    schema: {
      tags: ['dashboard'], querystring: overviewQuerySchema, response: { 200: overviewSchema },
      description: 'Tool calls and denies over time, top denied tools and policies, deny rates per member, agents with upstream errors, pending approvals: every figure counts calls as GET /api/dashboard/stats does.',
    },
    onRequest: requireUser(options.auth),
    preHandler,
  }, async (request) => {
    const q = request.query;
    const userId = request.user!.id;
    const scope = narrowed(await auditScopeOf(options.db, userId), q.agentId);
    const [o, pendingApprovals] = await Promise.all([
      options.audit.overview({ agentIds: scope.agentIds, from: q.from ?? '', to: q.to ?? '', redactPolicyAgentIds: scope.redactPolicyAgentIds, top: q.top }),
      pendingApprovalsOf(options.db, userId, q.agentId),
    ]);
    // Current names where the agent still exists; a deleted agent keeps the name its entries were recorded with.
    const agentName = (agentId: string, recorded = '') => scope.agentNames.get(agentId) ?? recorded;
    return {
      series: toApiHistogram(o.series),
      totals: { calls: Number(o.calls), denies: Number(o.denies) },
      topDeniedTools: (o.topDeniedTools ?? []).map((t) => ({ service: t.service, tool: t.tool, denies: Number(t.denies) })),
      topDeniedPolicies: (o.topDeniedPolicies ?? []).map((p) => ({
        policyId: p.policyDbId, policyKey: p.policyKey, name: p.policyName, agentId: p.agentId, agentName: agentName(p.agentId), denies: Number(p.denies),
      })),
      memberDenyRates: (o.memberDenyRates ?? []).map((m) => ({
        memberId: m.memberId, memberName: m.memberName, agentId: m.agentId, agentName: agentName(m.agentId), calls: Number(m.calls), denies: Number(m.denies),
        denyRate: Number(m.calls) === 0 ? 0 : Number(m.denies) / Number(m.calls),
      })),
      agentsWithErrors: (o.agentsWithErrors ?? []).map((a) => ({ agentId: a.agentId, agentName: agentName(a.agentId, a.agentName), errors: Number(a.errors), lastErrorAt: a.lastErrorAt })),
      pendingApprovals,
    };
  });

  /** The pending requests to join the agents the caller owns: the dashboard's badge (Postgres only). */
  app.get('/api/dashboard/pending-approvals', {
    schema: {
      tags: ['dashboard'], querystring: z.strictObject({ agentId: z.guid().optional() }), response: { 200: pendingApprovalsSchema },
      description: 'Members waiting for the caller\'s approval, over the agents the caller owns (or one of them).',
    },
    onRequest: requireUser(options.auth),
  }, async (request) => pendingApprovalsOf(options.db, request.user!.id, request.query.agentId));
}
