import type { CallerIdentity } from '../tools/tool-executor.ts';

/**
 * What the sandbox's OAuth server keeps in memory only (everything else is signed and
 * survives restarts): pending authorization codes, which refresh tokens were already used,
 * revoked grants, and the cut-offs the test controls set per connector and member. A
 * restart forgets all of it, as documented in docs/decisions/007-sandbox-oauth.md.
 */

/** Authorization codes live 60 seconds. */
export const AUTHORIZATION_CODE_TTL_MS = 60_000;

/** An authorization code as the consent page issued it: everything the token request is checked against. */
export interface PendingCode {
  connectorKey: string;
  clientId: string;
  redirectUri: string;
  /** The S256 `code_challenge` of the authorization request. */
  codeChallenge: string;
  /** The `resource` of the authorization request, if it named one. */
  resource?: string;
  /** The member as typed on the consent page. */
  identity: CallerIdentity;
  /** The grant the code's tokens will belong to. */
  grantId: string;
  issuedAtMs: number;
  expiresAtMs: number;
}

/** A code presented at the token endpoint: usable once; a second use finds it `reused`. */
export type CodeRedemption = { kind: 'valid'; code: PendingCode } | { kind: 'unknown' } | { kind: 'reused'; code: PendingCode };

function memberKey(connectorKey: string, login: string): string {
  return `${connectorKey}\u0000${login}`;
}

/** The in-memory state of the OAuth server of one sandbox process. */
export class GrantState {
  readonly #codes = new Map<string, PendingCode & { used: boolean }>();
  /** jti → when the refresh token expires (ms), so the entry can go once it would fail anyway. */
  readonly #usedRefreshTokens = new Map<string, number>();
  readonly #revokedGrants = new Set<string>();
  /** Per connector and member: grants issued up to this time (ms) are revoked. */
  readonly #grantsRevokedUntil = new Map<string, number>();
  /** Per connector and member: access tokens issued up to this time (ms) count as expired. */
  readonly #accessExpiredUntil = new Map<string, number>();

  /** Keeps a new code until it is redeemed or expires. */
  addCode(code: string, pending: PendingCode): void {
    this.#codes.set(code, { ...pending, used: false });
  }

  /**
   * Redeems a code: the first redemption gets it; later ones find it `reused` (and the
   * caller revokes its grant, RFC 6749 §4.1.2); expired or never issued codes are `unknown`.
   */
  redeemCode(code: string, now: number): CodeRedemption {
    const entry = this.#codes.get(code);
    if (!entry || now >= entry.expiresAtMs) return { kind: 'unknown' };
    const { used, ...pending } = entry;
    if (used) return { kind: 'reused', code: pending };
    entry.used = true;
    return { kind: 'valid', code: pending };
  }

  /** Marks a refresh token as used; false when it already was (rotation: each one works once). */
  useRefreshToken(jti: string, expiresAtMs: number): boolean {
    if (this.#usedRefreshTokens.has(jti)) return false;
    this.#usedRefreshTokens.set(jti, expiresAtMs);
    return true;
  }

  /** Revokes one grant: its refresh token and every access token it issued. */
  revokeGrant(grantId: string): void {
    this.#revokedGrants.add(grantId);
  }

  /** Revokes every grant of a member at a connector issued so far (the member removed the app). */
  revokeGrantsOf(connectorKey: string, login: string, now: number): void {
    this.#grantsRevokedUntil.set(memberKey(connectorKey, login), now);
  }

  /** Makes every access token of a member at a connector issued so far count as expired. */
  expireAccessTokensOf(connectorKey: string, login: string, now: number): void {
    this.#accessExpiredUntil.set(memberKey(connectorKey, login), now);
  }

  /** Whether a token (or code) of a grant, issued at `issuedAtMs`, belongs to a revoked grant. */
  isRevoked(connectorKey: string, login: string, grantId: string, issuedAtMs: number): boolean {
    return this.#revokedGrants.has(grantId) || issuedAtMs <= (this.#grantsRevokedUntil.get(memberKey(connectorKey, login)) ?? -Infinity);
  }

  /** Whether the test controls expired an access token issued at `issuedAtMs`. */
  isExpiredByControl(connectorKey: string, login: string, issuedAtMs: number): boolean {
    return issuedAtMs <= (this.#accessExpiredUntil.get(memberKey(connectorKey, login)) ?? -Infinity);
  }

  /** Forgets codes and used refresh tokens that can no longer be presented successfully anyway. */
  prune(now: number): void {
    for (const [code, entry] of this.#codes) if (now >= entry.expiresAtMs) this.#codes.delete(code);
    for (const [jti, expiresAtMs] of this.#usedRefreshTokens) if (now >= expiresAtMs) this.#usedRefreshTokens.delete(jti);
  }
}
