import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '@portcullis/core';
import type { AuthService, SessionUser } from '../modules/auth/auth-service.ts';

export const SESSION_COOKIE = 'portcullis_session';
/**
 * Set by `POST /api/auth/magic-link` (path `/api/auth`, 10 minutes): a random nonce whose digest
 * the sign-in link is bound to, so the link signs in only the browser that asked for it.
 */
export const SIGN_IN_COOKIE = 'portcullis_sign_in';

declare module 'fastify' {
  interface FastifyRequest { user?: SessionUser }
}

const pendingMessages = {
  mfa_required: 'Complete the MFA challenge first (POST /api/auth/mfa/verify).',
  mfa_enrolment_required: 'This account must use MFA: set it up first (POST /api/auth/mfa/setup, then /api/auth/mfa/verify-setup).',
} as const;

/**
 * A preHandler that requires a live dashboard session and sets `request.user`. A session that
 * is MFA pending (see `MfaState.pending`) gets 403 `forbidden` with `details.reason`
 * `mfa_required` or `mfa_enrolment_required`, so every router that uses this inherits the
 * MFA gate. Only the MFA routes and logout pass `{ allowMfaPending: true }`.
 */
export function requireUser(auth: Pick<AuthService, 'userOfSession'>, options: { allowMfaPending?: boolean } = {}) {
  return async (request: FastifyRequest, _reply: FastifyReply) => {
    const token = request.cookies[SESSION_COOKIE];
    const user = token ? await auth.userOfSession(token) : undefined;
    if (!user) throw new ApiError('unauthenticated', 'Sign in first: this request needs a dashboard session.');
    if (user.mfa.pending && !options.allowMfaPending) {
      throw new ApiError('forbidden', pendingMessages[user.mfa.pending], { reason: user.mfa.pending });
    }
    request.user = user;
  };
}

/**
 * Cookie-authenticated state changes must come from our own origin, so a form on another
 * site cannot act for a signed-in user (SameSite=Lax is the first line; this is the second).
 */
export function sameOriginGuard(allowedOrigins: string[]) {
  const allowed = new Set(allowedOrigins.map((o) => new URL(o).origin));
  return async (request: FastifyRequest) => {
    if (request.method === 'GET' || request.method === 'HEAD' || request.method === 'OPTIONS') return;
    if (!request.cookies[SESSION_COOKIE]) return;
    const origin = request.headers.origin ?? originOf(request.headers.referer);
    const host = request.headers.host;
    const selfOrigins = host ? [`http://${host}`, `https://${host}`] : [];
    if (!origin || !(allowed.has(origin) || selfOrigins.includes(origin))) {
      throw new ApiError('forbidden', 'Cross-site request refused: state-changing requests must come from the dashboard\'s origin.');
    }
  };
}

function originOf(url: string | undefined): string | undefined {
  if (!url) return undefined;
  try { return new URL(url).origin; } catch { return undefined; }
}
