import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '@portcullis/core';
import type { AuthService, SignedInUser } from '../modules/auth/auth-service.ts';

export const SESSION_COOKIE = 'portcullis_session';

declare module 'fastify' {
  interface FastifyRequest { user?: SignedInUser & { sessionId: string; mfaSatisfied: boolean } }
}

/** A preHandler that requires a live dashboard session (and satisfied MFA) and sets `request.user`. */
export function requireUser(auth: AuthService) {
  return async (request: FastifyRequest, _reply: FastifyReply) => {
    const token = request.cookies[SESSION_COOKIE];
    const user = token ? await auth.userOfSession(token) : undefined;
    if (!user) throw new ApiError('unauthenticated', 'Sign in first: this request needs a dashboard session.');
    if (!user.mfaSatisfied) throw new ApiError('forbidden', 'Complete the MFA challenge first.', { reason: 'mfa_required' });
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
