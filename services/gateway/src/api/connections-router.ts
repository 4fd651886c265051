import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { and, eq } from 'drizzle-orm';
import { ApiError, connectors, schema, type Bus, type Database } from '@portcullis/core';
import type { AuthService } from '../modules/auth/auth-service.ts';
import type { ConnectFlow } from '../modules/connections/connect-flow.ts';
import { loadAgentAccess } from '../modules/agents/agent-access.ts';
import { requireUser } from '../plugins/session-auth.ts';

const connectorKeys = connectors.map((c) => c.key) as [string, ...string[]];
const params = z.strictObject({
  id: z.string().uuid('must be a UUID'),
  service: z.enum(connectorKeys, { error: (issue) => `unknown service "${String(issue.input).slice(0, 64)}"` }),
});

/** Connecting takes no body: anything else is refused (400), as every route refuses unknown fields. */
const noBody = z.strictObject({}).nullish();

const oauthParam = z.string().max(2048).optional();
const callbackQuery = z.object({ state: oauthParam, code: oauthParam, error: z.string().max(256).optional() });

/**
 * The caller's own connections to connectors: the OAuth connect flow (start, and the
 * provider's redirect back) and disconnecting.
 */
export async function connectionsRoutes(fastify: FastifyInstance, options: { db: Database; bus: Pick<Bus, 'publishChange'>; auth: AuthService; connectFlow: ConnectFlow }) {
  const app = fastify.withTypeProvider<ZodTypeProvider>();

  /** Starts connecting the caller's own account: send the browser to `authorizeUrl`. */
  app.post('/api/agents/:id/connect/:service', {
    schema: { tags: ['connectors'], params, body: noBody, response: { 200: z.object({ authorizeUrl: z.string().url() }) } },
    onRequest: requireUser(options.auth),
  }, async (request) => options.connectFlow.start(request.user!.id, request.params.id, request.params.service));

  /**
   * Where the provider sends the browser back: finishes the flow the `state` names (for the
   * same signed-in user) and redirects to the dashboard. A bad or reused state is a 400.
   */
  app.get('/api/oauth/callback', {
    schema: { tags: ['connectors'], querystring: callbackQuery },
    onRequest: requireUser(options.auth),
  }, async (request, reply) => {
    const location = await options.connectFlow.complete(request.user!.id, request.query);
    request.log.info({ outcome: new URL(location).search.replace(/^\?/, '') }, 'oauth callback finished');
    return reply.code(302).header('cache-control', 'no-store').redirect(location);
  });

  /** Disconnects the caller's own connection; its sealed tokens are deleted at once. */
  app.delete('/api/agents/:id/connect/:service', {
    schema: { tags: ['connectors'], params },
    onRequest: requireUser(options.auth),
  }, async (request, reply) => {
    const { id, service } = request.params;
    const access = await loadAgentAccess(options.db, id, request.user!.id);
    const removed = await options.db.delete(schema.connections)
      .where(and(eq(schema.connections.memberId, access.membership.id), eq(schema.connections.service, service)))
      .returning({ id: schema.connections.id });
    if (removed.length === 0) throw new ApiError('not_found', `You have no ${service} connection on this agent.`);
    // Gateways drop cached connections of this agent at once, so the next call sees the change.
    options.bus.publishChange({ kind: 'agent.changed', agentId: id });
    return reply.code(204).send();
  });
}
