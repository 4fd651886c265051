import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { and, eq } from 'drizzle-orm';
import { ApiError, connectors, schema, type Bus, type Database } from '@portcullis/core';
import type { AuthService } from '../modules/auth/auth-service.ts';
import { loadAgentAccess } from '../modules/agents/agent-access.ts';
import { requireUser } from '../plugins/session-auth.ts';

const connectorKeys = connectors.map((c) => c.key) as [string, ...string[]];
const params = z.strictObject({
  id: z.string().uuid('must be a UUID'),
  service: z.enum(connectorKeys, { error: (issue) => `unknown service "${String(issue.input).slice(0, 64)}"` }),
});

/** The caller's own connections to connectors (the OAuth connect flow itself is issue 4's). */
export async function connectionsRoutes(fastify: FastifyInstance, options: { db: Database; bus: Pick<Bus, 'publishChange'>; auth: AuthService }) {
  const app = fastify.withTypeProvider<ZodTypeProvider>();

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
