import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { CODE_TTL_MS, normaliseEmail, type AuthService } from '../modules/auth/auth-service.ts';
import { requireUser, SESSION_COOKIE, SIGN_IN_COOKIE } from '../plugins/session-auth.ts';
import { createLimiters, type AuthRateLimits } from '../plugins/rate-limits.ts';

const email = z.string().trim().max(320).email();
const magicLinkBody = z.strictObject({ email });
const verifyBody = z.union([
  z.strictObject({ email, code: z.string().regex(/^\d{6,10}$/, 'must be the digits from the e-mail') }),
  z.strictObject({ token: z.string().min(16).max(200) }),
]);
const totpCode = z.string().trim().regex(/^\d{6}$/, 'must be the 6 digits from the authenticator app');
const mfaVerifySetupBody = z.strictObject({ code: totpCode });
const mfaVerifyBody = z.union([
  z.strictObject({ code: totpCode }),
  z.strictObject({ backupCode: z.string().trim().min(8).max(32) }),
]);

// What the routes answer (declared so the dashboard's generated types follow them, decision 040).
const userAnswer = z.object({ id: z.string(), email: z.string() });
const mfaState = z.object({ enabled: z.boolean(), satisfied: z.boolean(), required: z.boolean() });
const statusAnswer = z.object({ authenticated: z.boolean(), user: userAnswer.optional(), mfa: mfaState });
const okAnswer = z.object({ ok: z.boolean() });

/** The sign-in nonce: 256 random bits, base64url. Anything else in the cookie is ignored. */
const NONCE_PATTERN = /^[A-Za-z0-9_-]{43}$/;
/** As long as a code or link lives (10 minutes). */
const SIGN_IN_COOKIE_MAX_AGE_SECONDS = CODE_TTL_MS / 1000;

function signInNonceOf(request: FastifyRequest): string | undefined {
  const nonce = request.cookies[SIGN_IN_COOKIE];
  return nonce && NONCE_PATTERN.test(nonce) ? nonce : undefined;
}

/**
 * Sign-in by e-mail code or link, session status, logout, and the MFA operations (setup,
 * verify-setup, verify). The MFA routes and logout accept an MFA-pending session; nothing
 * else does (see `requireUser`).
 */
export async function authRoutes(fastify: FastifyInstance, options: { auth: AuthService; secureCookies: boolean; sessionMaxMs: number; rateLimits: AuthRateLimits }) {
  const { auth, rateLimits } = options;
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const limiter = await createLimiters(fastify);
  const magicLinkPerIp = limiter(rateLimits.magicLinkPerIp, 'sign-in requests from this address');
  // Counted per address whether or not it has an account, so a 429 says nothing about existence.
  const magicLinkPerAddress = limiter(rateLimits.magicLinkPerAddress, 'sign-in requests for this e-mail address',
    (request) => `email:${normaliseEmail((request.body as { email: string }).email)}`);
  const verifyPerIp = limiter(rateLimits.verifyPerIp, 'sign-in attempts from this address');
  const mfaPerIp = limiter(rateLimits.mfaPerIp, 'MFA attempts from this address');
  const sessionEvenIfMfaPending = requireUser(auth, { allowMfaPending: true });
  const signInCookie = { path: '/api/auth', httpOnly: true, sameSite: 'lax', secure: options.secureCookies } as const;

  /**
   * The browser's sign-in nonce: the one its cookie already holds (so every link this browser
   * asked for keeps working), else a new one; the cookie is (re)set for the link's lifetime.
   */
  function bindBrowser(request: FastifyRequest, reply: FastifyReply): string {
    const nonce = signInNonceOf(request) ?? randomBytes(32).toString('base64url');
    reply.setCookie(SIGN_IN_COOKIE, nonce, { ...signInCookie, maxAge: SIGN_IN_COOKIE_MAX_AGE_SECONDS });
    return nonce;
  }

  function setSessionCookie(reply: FastifyReply, token: string): void {
    reply.setCookie(SESSION_COOKIE, token, {
      path: '/', httpOnly: true, sameSite: 'lax', secure: options.secureCookies, maxAge: Math.floor(options.sessionMaxMs / 1000),
    });
  }

  app.post('/api/auth/magic-link', {
    schema: { tags: ['auth'], body: magicLinkBody, response: { 202: z.object({ sent: z.literal(true) }) } }, onRequest: magicLinkPerIp, preHandler: magicLinkPerAddress,
  }, async (request, reply) => {
    await auth.requestSignIn(request.body.email, request.ip, bindBrowser(request, reply));
    return reply.code(202).send({ sent: true });
  });

  app.post('/api/auth/verify', { schema: { tags: ['auth'], body: verifyBody, response: { 200: z.object({ user: userAnswer, mfaRequired: z.boolean() }) } }, onRequest: verifyPerIp }, async (request, reply) => {
    const browserNonce = signInNonceOf(request);
    const session = await auth.verify(request.body, { ip: request.ip, userAgent: request.headers['user-agent'], browserNonce });
    setSessionCookie(reply, session.token);
    if (request.cookies[SIGN_IN_COOKIE] !== undefined) reply.clearCookie(SIGN_IN_COOKIE, signInCookie);
    return { user: session.user, mfaRequired: session.mfaRequired };
  });

  app.get('/api/auth/status', { schema: { tags: ['auth'], response: { 200: statusAnswer } } }, async (request) => {
    const token = request.cookies[SESSION_COOKIE];
    const user = token ? await auth.userOfSession(token) : undefined;
    if (!user) return { authenticated: false, mfa: { enabled: false, satisfied: false, required: false } };
    const { enabled, satisfied, required } = user.mfa;
    return { authenticated: true, user: { id: user.id, email: user.email }, mfa: { enabled, satisfied, required } };
  });

  app.post('/api/auth/logout', { schema: { tags: ['auth'], response: { 200: okAnswer } }, preHandler: sessionEvenIfMfaPending }, async (request, reply) => {
    await auth.endSession(request.cookies[SESSION_COOKIE]!);
    reply.clearCookie(SESSION_COOKIE, { path: '/' });
    return { ok: true };
  });

  app.post('/api/auth/mfa/setup', { schema: { tags: ['auth'], response: { 200: z.object({ secret: z.string(), otpauthUrl: z.string() }) } }, preHandler: sessionEvenIfMfaPending }, async (request) =>
    auth.mfa.setup(request.user!));

  app.post('/api/auth/mfa/verify-setup', {
    schema: { tags: ['auth'], body: mfaVerifySetupBody, response: { 200: z.object({ backupCodes: z.array(z.string()) }) } }, onRequest: mfaPerIp, preHandler: sessionEvenIfMfaPending,
  }, async (request, reply) => {
    // Enrolment satisfies MFA: the session gets a new token, as after the challenge.
    const { backupCodes, sessionToken } = await auth.mfa.verifySetup(request.user!, request.body.code);
    setSessionCookie(reply, sessionToken);
    return { backupCodes };
  });

  app.post('/api/auth/mfa/verify', {
    schema: { tags: ['auth'], body: mfaVerifyBody, response: { 200: okAnswer } }, onRequest: mfaPerIp, preHandler: sessionEvenIfMfaPending,
  }, async (request, reply) => {
    // The session gets a new token (ASVS V3.2.1): the first factor's cookie stops working (decision 068).
    const { sessionToken } = await auth.mfa.verify(request.user!, request.body);
    setSessionCookie(reply, sessionToken);
    return { ok: true };
  });
}
