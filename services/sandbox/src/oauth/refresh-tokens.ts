import { createHash, randomBytes } from 'node:crypto';
import { z } from 'zod';
import { openSignedClaims, signClaims } from '../signed-token.ts';
import type { CallerIdentity } from '../tools/tool-executor.ts';

/**
 * Refresh tokens: `sbr_<payload>.<signature>` signed with their own key, carrying the
 * connector, a fingerprint of the client they were issued to, the grant, the member and a
 * unique id. Signed rather than stored, so they survive a restart with the same secret;
 * which ones were already used (rotation) is kept in memory only (`grant-state.ts`).
 */

const REFRESH_TOKEN_PREFIX = 'sbr_';

/** Refresh tokens live 30 days. */
export const REFRESH_TOKEN_TTL_SECONDS = 30 * 24 * 60 * 60;

/** What a valid refresh token says. */
export interface RefreshTokenClaims {
  svc: string;
  /** `clientFingerprintOf(clientId)` of the client it was issued to. */
  cid: string;
  gid: string;
  login: string;
  name?: string;
  /** Issued at, seconds since the epoch with milliseconds as a fraction. */
  iat: number;
  /** Expires at, whole seconds since the epoch. */
  exp: number;
  /** Unique per token: what rotation marks as used. */
  jti: string;
}

/** A short, fixed-size stand-in for a client id (client ids carry their redirect URIs and can be long). */
export function clientFingerprintOf(clientId: string): string {
  return createHash('sha256').update(clientId).digest('base64url');
}

/** What a new refresh token is for. */
export interface RefreshTokenSubject {
  connectorKey: string;
  clientId: string;
  grantId: string;
  identity: CallerIdentity;
}

/** Issues a refresh token valid for 30 days. */
export function issueRefreshToken(key: Buffer, subject: RefreshTokenSubject, now = Date.now()): string {
  const { identity } = subject;
  const claims: RefreshTokenClaims = {
    svc: subject.connectorKey,
    cid: clientFingerprintOf(subject.clientId),
    gid: subject.grantId,
    login: identity.login,
    ...(identity.name !== undefined ? { name: identity.name } : {}),
    iat: now / 1000,
    exp: Math.ceil(now / 1000) + REFRESH_TOKEN_TTL_SECONDS,
    jti: randomBytes(16).toString('base64url'),
  };
  return signClaims(REFRESH_TOKEN_PREFIX, key, claims);
}

const refreshClaimsSchema = z.object({
  svc: z.string(),
  cid: z.string(),
  gid: z.string().min(1),
  login: z.string().min(1),
  name: z.string().optional(),
  iat: z.number(),
  exp: z.number(),
  jti: z.string().min(1),
});

/** The claims of a refresh token signed with `key`; undefined for anything else. Expiry is the caller's to check. */
export function verifyRefreshToken(key: Buffer, token: string): RefreshTokenClaims | undefined {
  const opened = openSignedClaims(REFRESH_TOKEN_PREFIX, key, token);
  const claims = opened && refreshClaimsSchema.safeParse(opened);
  if (!claims?.success) return undefined;
  const { name, ...rest } = claims.data;
  return { ...rest, ...(name !== undefined ? { name } : {}) };
}
