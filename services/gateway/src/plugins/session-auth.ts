import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, isLoopbackHostname } from '@portcullis/core';
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

/** Which browser origins may make cookie-authenticated state changes. */
export interface SameOriginPolicy {
  /** The dashboard's public address (`PUBLIC_URL`, or the address the gateway listens on). */
  publicUrl: string;
  /** Outside production: any loopback origin too (`http://localhost:5173`, a dashboard dev server). */
  allowLoopbackOrigins: boolean;
}

/**
 * Cookie-authenticated state changes must come from our own origin, so a form on another
 * site cannot act for a signed-in user (SameSite=Lax is the first line; this is the second).
 * `Origin` (or, without it, `Referer`) is compared with the configured public origin — never
 * with the request's own `Host`, which whoever sends the request chooses (decision 068).
 */
export function sameOriginGuard(policy: SameOriginPolicy) {
  const publicOrigin = new URL(policy.publicUrl).origin;
  return async (request: FastifyRequest) => {
    if (request.method === 'GET' || request.method === 'HEAD' || request.method === 'OPTIONS') return;
    if (!request.cookies[SESSION_COOKIE]) return;
    const origin = originOf(request.headers.origin || request.headers.referer);
    const accepted = origin !== undefined && (origin.origin === publicOrigin
      || (policy.allowLoopbackOrigins && (origin.protocol === 'http:' || origin.protocol === 'https:') && isLoopbackHostname(origin.hostname)));
    if (!accepted) {
      // Scripts that reuse the cookie hear what to send (decision 071); the public origin is no secret.
      throw new ApiError('forbidden', `Cross-site request refused: state-changing requests must come from the dashboard's origin (send Origin: ${publicOrigin}).`);
    }
  };
}

function originOf(url: string | undefined): URL | undefined {
  if (!url) return undefined;
  try { return new URL(url); } catch { return undefined; }
}
