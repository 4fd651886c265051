import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Database } from '@portcullis/core';
import type { AuthService } from '../modules/auth/auth-service.ts';
import { agentIdParams, loadAgentAccess } from '../modules/agents/agent-access.ts';
import { requireUser } from '../plugins/session-auth.ts';

const setupSchema = z.object({
  mcpUrl: z.string().describe('The external URL of the tool-protocol endpoint, from the gateway\'s PUBLIC_URL (or the address it listens on)'),
});

/** `https://portcullis.example.com/mcp` from `https://portcullis.example.com/` (a path prefix is kept). */
export function mcpUrlOf(publicUrl: string): string {
  return `${publicUrl.replace(/\/+$/, '')}/mcp`;
}

/**
 * GET /api/agents/:id/setup (decision 046): what an MCP client needs to reach this agent —
 * the external `/mcp` URL. Any member who is not rejected (a pending member sets up while they
 * wait); others get the agent's usual 404. Nothing secret: keys are shown once at creation
 * and the dashboard's snippets carry a placeholder.
 */
export async function setupRoutes(fastify: FastifyInstance, options: { db: Database; auth: AuthService; publicUrl: string }) {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const mcpUrl = mcpUrlOf(options.publicUrl);
  app.get('/api/agents/:id/setup', {
    schema: { tags: ['agents'], summary: 'The MCP URL a member\'s client connects to', params: agentIdParams, response: { 200: setupSchema } },
    onRequest: requireUser(options.auth),
  }, async (request) => {
    await loadAgentAccess(options.db, request.params.id, request.user!.id);
    return { mcpUrl };
  });
}
