import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { and, eq } from 'drizzle-orm';
import { schema, type AuditEntryMsg, type Database } from '@portcullis/core';
import type { AuditClient } from '../clients/audit-client.ts';
import type { AuthService } from '../modules/auth/auth-service.ts';
import { requireUser } from '../plugins/session-auth.ts';

const isoDate = z.string().max(40).refine((v) => !Number.isNaN(Date.parse(v)) && /^\d{4}-\d{2}-\d{2}/.test(v), 'must be an ISO 8601 date');
const shortText = z.string().max(200);

/** The query parameters of GET /api/audit, exactly as the interface specification lists them. */
export const auditQuerySchema = z.strictObject({
  from: isoDate.optional(),
  to: isoDate.optional(),
  agent: shortText.optional(),
  service: shortText.optional(),
  tool: shortText.optional(),
  result: z.enum(['ALLOW', 'DENY']).optional(),
  member: shortText.optional(),
  policy: shortText.optional(),
  limit: z.coerce.number().int().min(1).default(500).transform((n) => Math.min(n, 500)),
  offset: z.coerce.number().int().min(0).max(10_000_000).default(0),
});

/** The agents whose audit data a user may read: those they own or are an approved member of. */
export async function visibleAgentIds(db: Database, userId: string): Promise<string[]> {
  const rows = await db.select({ agentId: schema.members.agentId }).from(schema.members)
    .where(and(eq(schema.members.userId, userId), eq(schema.members.status, 'approved')));
  return rows.map((r) => r.agentId);
}

/** An audit entry as the REST API shows it: the spec's fields, plus `user`. */
export function toApiEntry(e: AuditEntryMsg) {
  return {
    id: e.id,
    timestamp: e.timestamp,
    agentId: e.agentId,
    agentName: e.agentName,
    memberId: e.memberId,
    memberName: e.memberName,
    user: e.memberName,
    memberKeyId: e.memberKeyId,
    ...(e.sessionId ? { sessionId: e.sessionId } : {}),
    service: e.service,
    tool: e.tool,
    action: e.action,
    resource: e.resource,
    callerIp: e.callerIp,
    toolArgs: safeJson(e.toolArgsJson),
    decision: e.decision,
    reason: e.reason,
    matchedPolicyIds: e.matchedPolicyIds,
    matchedPolicyNames: e.matchedPolicyNames,
    policyVersionIds: e.policyVersionIds,
    durationMs: e.durationMs,
    principal: e.principal,
  };
}

function safeJson(text: string): Record<string, unknown> {
  try { return JSON.parse(text || '{}') as Record<string, unknown>; } catch { return {}; }
}

export async function auditRoutes(fastify: FastifyInstance, options: { db: Database; auth: AuthService; audit: AuditClient }) {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  app.get('/api/audit', { schema: { tags: ['audit'], querystring: auditQuerySchema }, preHandler: requireUser(options.auth) }, async (request) => {
    const q = request.query;
    const agentIds = await visibleAgentIds(options.db, request.user!.id);
    const { entries, total } = await options.audit.query({
      filter: {
        agentIds, from: q.from ?? '', to: q.to ?? '', agent: q.agent ?? '', service: q.service ?? '', tool: q.tool ?? '',
        result: q.result ?? '', member: q.member ?? '', policy: q.policy ?? '',
      },
      limit: q.limit,
      offset: q.offset,
    });
    return { entries: entries.map(toApiEntry), total: Number(total) };
  });
}
