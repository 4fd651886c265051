import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { ApiError } from '@portcullis/core';
import type { AuthService } from '../modules/auth/auth-service.ts';
import { requireUser, SESSION_COOKIE } from '../plugins/session-auth.ts';

const sessionParams = z.strictObject({ id: z.string().uuid('must be a UUID') });

/** GET /api/users/me/sessions (declared so the dashboard's generated types follow it, decision 040). */
const sessionsAnswer = z.object({
  sessions: z.array(z.object({
    id: z.string(), createdAt: z.string(), lastSeenAt: z.string(), expiresAt: z.string(),
    ip: z.string().nullable(), userAgent: z.string().nullable(), current: z.boolean(),
  })),
});

/** The signed-in user's own dashboard sessions: list them, end one (e.g. a lost laptop). */
export async function accountRoutes(fastify: FastifyInstance, options: { auth: AuthService }) {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const { auth } = options;

  app.get('/api/users/me/sessions', { schema: { tags: ['account'], response: { 200: sessionsAnswer } }, preHandler: requireUser(auth) }, async (request) => {
    const sessions = await auth.listSessions(request.user!.id);
    return { sessions: sessions.map((s) => ({ ...s, current: s.id === request.user!.sessionId })) };
  });

  app.delete('/api/users/me/sessions/:id', {
    schema: { tags: ['account'], params: sessionParams }, preHandler: requireUser(auth),
  }, async (request, reply) => {
    // Someone else's session gets the same 404 as an unknown one: ids reveal nothing.
    if (!(await auth.endSessionOfUser(request.user!.id, request.params.id))) throw new ApiError('not_found', 'Session not found.');
    if (request.params.id === request.user!.sessionId) reply.clearCookie(SESSION_COOKIE, { path: '/' });
    return reply.code(204).send();
  });
}
