import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AuthService } from '../modules/auth/auth-service.ts';
import { requireUser, SESSION_COOKIE } from '../plugins/session-auth.ts';

const email = z.string().trim().max(320).email();
const magicLinkBody = z.strictObject({ email });
const verifyBody = z.union([
  z.strictObject({ email, code: z.string().regex(/^\d{6,10}$/, 'must be the digits from the e-mail') }),
  z.strictObject({ token: z.string().min(16).max(200) }),
]);

/** Sign-in by e-mail code or link, session status and logout. */
export async function authRoutes(fastify: FastifyInstance, options: { auth: AuthService; secureCookies: boolean; sessionMaxMs: number }) {
  const { auth } = options;
  const app = fastify.withTypeProvider<ZodTypeProvider>();

  app.post('/api/auth/magic-link', { schema: { tags: ['auth'], body: magicLinkBody } }, async (request, reply) => {
    await auth.requestSignIn(request.body.email, request.ip);
    return reply.code(202).send({ sent: true });
  });

  app.post('/api/auth/verify', { schema: { tags: ['auth'], body: verifyBody } }, async (request, reply) => {
    const session = await auth.verify(request.body, { ip: request.ip, userAgent: request.headers['user-agent'] });
    reply.setCookie(SESSION_COOKIE, session.token, {
      path: '/', httpOnly: true, sameSite: 'lax', secure: options.secureCookies, maxAge: Math.floor(options.sessionMaxMs / 1000),
    });
    return { user: session.user, mfaRequired: session.mfaRequired };
  });

  app.get('/api/auth/status', { schema: { tags: ['auth'] } }, async (request) => {
    const token = request.cookies[SESSION_COOKIE];
    const user = token ? await auth.userOfSession(token) : undefined;
    if (!user) return { authenticated: false, mfa: { enabled: false, satisfied: false } };
    return { authenticated: true, user: { id: user.id, email: user.email }, mfa: { enabled: !user.mfaSatisfied, satisfied: user.mfaSatisfied } };
  });

  app.post('/api/auth/logout', { schema: { tags: ['auth'] }, preHandler: requireUser(auth) }, async (request, reply) => {
    await auth.endSession(request.cookies[SESSION_COOKIE]!);
    reply.clearCookie(SESSION_COOKIE, { path: '/' });
    return { ok: true };
  });
}
