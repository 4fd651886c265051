import { deriveSandboxKey, openSignedClaims, signClaims } from './signed-token.ts';
import type { CallerIdentity } from './tools/tool-executor.ts';

/**
 * Sandbox access tokens: `sbx_<payload>.<signature>`, where the payload is base64url JSON
 * `{svc, login, name?, iat, exp?, gid?}` and the signature base64url HMAC-SHA256 of the
 * payload text (`signed-token.ts`). They verify without any stored state, so tokens a seed
 * issued keep working after the sandbox restarts with the same secret, and stop working
 * under another secret.
 *
 * Two kinds share the format: fixture tokens (`POST /_sandbox/<connector>/tokens`,
 * `sandbox.issueToken`) carry no `exp`/`gid` and never expire; tokens of the OAuth server
 * carry `exp` and the grant id `gid`, which revocation and the test controls act on.
 */

const TOKEN_PREFIX = 'sbx_';

/** What a valid token says: the connector it is for and the member it stands for. */
export interface SandboxTokenClaims {
  svc: string;
  login: string;
  name?: string;
  /**
   * Issued at, seconds since the epoch. Whole seconds on fixture tokens; OAuth tokens keep
   * the milliseconds as a fraction (a JWT NumericDate may), so "every token issued so far"
   * does not catch one issued later in the same second.
   */
  iat: number;
  /** Expires at, whole seconds since the epoch; only on OAuth tokens. */
  exp?: number;
  /** The grant (one consent, all its refreshes) the token belongs to; only on OAuth tokens. */
  gid?: string;
}

/** What the OAuth server adds to an access token it issues for a grant. */
export interface GrantTokenTerms {
  grantId: string;
  ttlSeconds: number;
}

/**
 * The HMAC key of sandbox tokens, derived (HKDF-SHA256, label `portcullis sandbox tokens v1`)
 * from the server secret, so the secret itself never signs anything here.
 */
export function deriveTokenKey(secret: string): Buffer {
  return deriveSandboxKey(secret, 'portcullis sandbox tokens v1');
}

function identityClaims(service: string, identity: CallerIdentity): Pick<SandboxTokenClaims, 'svc' | 'login' | 'name'> {
  return { svc: service, login: identity.login, ...(identity.name !== undefined ? { name: identity.name } : {}) };
}

/** Issues a fixture token for `service` that names `identity` and never expires. */
export function issueSandboxToken(key: Buffer, service: string, identity: CallerIdentity, now = Date.now()): string {
  const claims: SandboxTokenClaims = { ...identityClaims(service, identity), iat: Math.floor(now / 1000) };
  return signClaims(TOKEN_PREFIX, key, claims);
}

/** Issues an OAuth access token of a grant: it expires after `ttlSeconds` (never sooner). */
export function issueGrantAccessToken(key: Buffer, service: string, identity: CallerIdentity, terms: GrantTokenTerms, now = Date.now()): string {
  const claims: SandboxTokenClaims = { ...identityClaims(service, identity), iat: now / 1000, exp: Math.ceil(now / 1000) + terms.ttlSeconds, gid: terms.grantId };
  return signClaims(TOKEN_PREFIX, key, claims);
}

/** When a token was issued, in milliseconds since the epoch. */
export function issuedAtMsOf(claims: Pick<SandboxTokenClaims, 'iat'>): number {
  return Math.round(claims.iat * 1000);
}

function claimsOf(parsed: Record<string, unknown>): SandboxTokenClaims | undefined {
  const { svc, login, name, iat, exp, gid } = parsed;
  if (typeof svc !== 'string' || typeof login !== 'string' || login.length === 0 || typeof iat !== 'number') return undefined;
  if (name !== undefined && typeof name !== 'string') return undefined;
  if (exp !== undefined && typeof exp !== 'number') return undefined;
  if (gid !== undefined && (typeof gid !== 'string' || gid.length === 0)) return undefined;
  return { svc, login, ...(name !== undefined ? { name } : {}), iat, ...(exp !== undefined ? { exp } : {}), ...(gid !== undefined ? { gid } : {}) };
}

/** The claims of a token signed with `key`; undefined for anything else. Expiry is the caller's to check. */
export function verifySandboxToken(key: Buffer, token: string): SandboxTokenClaims | undefined {
  const parsed = openSignedClaims(TOKEN_PREFIX, key, token);
  return parsed && claimsOf(parsed);
}

/** The token of an `Authorization: Bearer <token>` header, if that is what the header holds. */
export function bearerTokenOf(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const match = /^Bearer +(\S+)\s*$/i.exec(header);
  return match?.[1];
}
