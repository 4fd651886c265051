import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { ApiError, type Database } from '@portcullis/core';
import type { AuditClient } from '../clients/audit-client.ts';
import type { AuthService } from '../modules/auth/auth-service.ts';
import { agentIdParams, loadAgentAccess, requireOwner, type AgentAccess } from '../modules/agents/agent-access.ts';
import { hidesPolicyIdentities } from '../modules/audit/audit-scope.ts';
import type { SessionRegistry, ToolSessionView } from '../modules/sessions/session-registry.ts';
import { requireUser } from '../plugins/session-auth.ts';

const sessionParams = z.strictObject({
  id: z.string().uuid('must be a UUID'),
  sessionId: z.string().uuid('must be a session id (a UUID)'),
});
const page = {
  status: z.enum(['active', 'expired', 'terminated']).optional(),
  limit: z.coerce.number().int().min(1).default(50).transform((n) => Math.min(n, 200)),
  offset: z.coerce.number().int().min(0).max(10_000_000).default(0),
};
const listQuery = z.strictObject({ ...page, memberId: z.string().uuid('must be a UUID').optional() });
const myQuery = z.strictObject(page);

/** A tool (MCP) session as the API shows it (`ToolSessionView`). */
const toolSessionSchema = z.object({
  id: z.string(), agentId: z.string(),
  memberId: z.string(), memberEmail: z.string(), keyId: z.string().describe('Key record id, never the key'),
  clientName: z.string(), clientVersion: z.string(), protocolVersion: z.string(),
  status: z.enum(['active', 'expired', 'terminated']),
  createdAt: z.string().describe('ISO 8601'), lastSeenAt: z.string().describe('ISO 8601'),
  endedAt: z.string().nullable().describe('ISO 8601; null while active'),
  endReason: z.string().nullable(),
});
const sessionPageSchema = z.object({ sessions: z.array(toolSessionSchema), total: z.number().int() });
const counts = { calls: z.number().int(), allowed: z.number().int(), denied: z.number().int() };
const activitySchema = z.object({
  session: toolSessionSchema,
  ...counts,
  firstCallAt: z.string().nullable().describe('ISO 8601; null before the first call'),
  lastCallAt: z.string().nullable(),
  tools: z.array(z.object({ service: z.string(), tool: z.string(), ...counts })),
  policies: z.array(z.object({ policyId: z.string(), policyKey: z.string(), policyName: z.string(), hits: z.number().int() }))
    .describe('Empty for a member of a trusted agent who is not its owner (decision 022)'),
});

/**
 * Tool (MCP) sessions of an agent (decision 017). Owners see and reset every session; a
 * member sees and resets only their own. A session of another agent, or another member's
 * session asked for by a member, is 404 like one that does not exist.
 */
export async function sessionsRoutes(fastify: FastifyInstance, options: { db: Database; auth: AuthService; audit: Pick<AuditClient, 'sessionActivity'>; sessions: SessionRegistry }) {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const onRequest = requireUser(options.auth);
  const tags = ['sessions'];

  /** The session, if the caller may see it: owners any of the agent's, members their own. */
  async function visibleSession(access: AgentAccess, sessionId: string): Promise<ToolSessionView> {
    const session = await options.sessions.get(access.agent.id, sessionId);
    if (!session || (!access.isOwner && session.memberId !== access.membership.id)) throw new ApiError('not_found', 'Session not found.');
    return session;
  }

  app.get('/api/agents/:id/sessions', {
    schema: { tags, summary: 'Tool sessions of the agent (owner)', params: agentIdParams, querystring: listQuery, response: { 200: sessionPageSchema } },
    onRequest,
  }, async (request) => {
    const access = await loadAgentAccess(options.db, request.params.id, request.user!.id);
    requireOwner(access);
    return options.sessions.list(access.agent.id, request.query);
  });

  app.get('/api/agents/:id/my-sessions', {
    schema: { tags, summary: 'The caller\'s own tool sessions', params: agentIdParams, querystring: myQuery, response: { 200: sessionPageSchema } },
    onRequest,
  }, async (request) => {
    const access = await loadAgentAccess(options.db, request.params.id, request.user!.id);
    return options.sessions.list(access.agent.id, { ...request.query, memberId: access.membership.id });
  });

  app.get('/api/agents/:id/sessions/:sessionId/activity', {
    schema: { tags, summary: 'Per-tool usage and policy hit counts of a session (owner, or its member)', params: sessionParams, response: { 200: activitySchema } },
    onRequest,
  }, async (request) => {
    const access = await loadAgentAccess(options.db, request.params.id, request.user!.id);
    const session = await visibleSession(access, request.params.sessionId);
    // A member of a trusted agent who is not its owner sees no policy identities (decision 022): `policies` is empty.
    const activity = await options.audit.sessionActivity({
      agentId: access.agent.id, sessionId: session.id, redactPolicyIdentities: hidesPolicyIdentities(access.agent.type, access.isOwner ? 'owner' : 'member'),
    });
    return {
      session,
      calls: Number(activity.calls), allowed: Number(activity.allowed), denied: Number(activity.denied),
      firstCallAt: activity.firstCallAt || null, lastCallAt: activity.lastCallAt || null,
      tools: (activity.tools ?? []).map((t) => ({ ...t, calls: Number(t.calls), allowed: Number(t.allowed), denied: Number(t.denied) })),
      policies: (activity.policies ?? []).map((p) => ({ policyId: p.policyDbId, policyKey: p.policyKey, policyName: p.policyName, hits: Number(p.hits) })),
    };
  });

  app.post('/api/agents/:id/sessions/:sessionId/reset', {
    schema: { tags, summary: 'Terminate a session; its session-condition counters start fresh (owner, or its member)', params: sessionParams, response: { 200: toolSessionSchema } },
    onRequest,
  }, async (request) => {
    const access = await loadAgentAccess(options.db, request.params.id, request.user!.id);
    const session = await visibleSession(access, request.params.sessionId);
    await options.sessions.end(session.id, 'reset');
    return (await options.sessions.get(access.agent.id, session.id))!;
  });
}
