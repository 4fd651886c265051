import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';
import type { CallerIdentity } from './tools/tool-executor.ts';

/**
 * Sandbox access tokens: `sbx_<payload>.<signature>`, where the payload is base64url JSON
 * `{svc, login, name?, iat}` and the signature base64url HMAC-SHA256 of the payload text.
 * They verify without any stored state, so tokens a seed issued keep working after the
 * sandbox restarts with the same secret, and stop working under another secret.
 */

const TOKEN_PREFIX = 'sbx_';

/** What a valid token says: the connector it is for and the member it stands for. */
export interface SandboxTokenClaims {
  svc: string;
  login: string;
  name?: string;
  /** Issued at, seconds since the epoch. */
  iat: number;
}

/**
 * The HMAC key of sandbox tokens, derived (HKDF-SHA256, label `portcullis sandbox tokens v1`)
 * from the server secret, so the secret itself never signs anything here.
 */
export function deriveTokenKey(secret: string): Buffer {
  if (secret.length === 0) throw new Error('the sandbox needs a non-empty secret');
  return Buffer.from(hkdfSync('sha256', secret, 'portcullis', 'portcullis sandbox tokens v1', 32));
}

function signatureOf(key: Buffer, payload: string): Buffer {
  return createHmac('sha256', key).update(payload).digest();
}

/** Issues a token for `service` that names `identity`. */
export function issueSandboxToken(key: Buffer, service: string, identity: CallerIdentity, now = Date.now()): string {
  const claims: SandboxTokenClaims = { svc: service, login: identity.login, ...(identity.name !== undefined ? { name: identity.name } : {}), iat: Math.floor(now / 1000) };
  const payload = Buffer.from(JSON.stringify(claims)).toString('base64url');
  return `${TOKEN_PREFIX}${payload}.${signatureOf(key, payload).toString('base64url')}`;
}

function claimsOf(payload: string): SandboxTokenClaims | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const { svc, login, name, iat } = parsed as Record<string, unknown>;
  if (typeof svc !== 'string' || typeof login !== 'string' || login.length === 0 || typeof iat !== 'number') return undefined;
  if (name !== undefined && typeof name !== 'string') return undefined;
  return { svc, login, ...(name !== undefined ? { name } : {}), iat };
}

/** The claims of a token signed with `key`; undefined for anything else. */
export function verifySandboxToken(key: Buffer, token: string): SandboxTokenClaims | undefined {
  if (!token.startsWith(TOKEN_PREFIX)) return undefined;
  const dot = token.indexOf('.', TOKEN_PREFIX.length);
  if (dot < 0) return undefined;
  const payload = token.slice(TOKEN_PREFIX.length, dot);
  // Compared as text, so exactly one spelling of the signature is accepted.
  const presented = Buffer.from(token.slice(dot + 1));
  const expected = Buffer.from(signatureOf(key, payload).toString('base64url'));
  if (presented.length !== expected.length || !timingSafeEqual(presented, expected)) return undefined;
  return claimsOf(payload);
}

/** The token of an `Authorization: Bearer <token>` header, if that is what the header holds. */
export function bearerTokenOf(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const match = /^Bearer +(\S+)\s*$/i.exec(header);
  return match?.[1];
}
