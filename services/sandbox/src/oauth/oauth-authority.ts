import { createHash, randomBytes } from 'node:crypto';
import { issueGrantAccessToken, issuedAtMsOf, verifySandboxToken, type SandboxTokenClaims } from '../sandbox-tokens.ts';
import { textsMatch } from '../signed-token.ts';
import type { CallerIdentity } from '../tools/tool-executor.ts';
import { AUTHORIZATION_CODE_TTL_MS, GrantState } from './grant-state.ts';
import { clientSecretMatches, registerClient, verifyClientId, type ClientRegistration, type OAuthClient, type RegisteredClient } from './oauth-clients.ts';
import type { OAuthKeys } from './oauth-keys.ts';
import { clientFingerprintOf, issueRefreshToken, verifyRefreshToken } from './refresh-tokens.ts';

/**
 * The rules of the sandbox's OAuth authorization server, apart from HTTP: clients, codes,
 * token issue and rotation, revocation, and the checks every access token goes through.
 * The endpoints in this folder parse requests and turn these outcomes into responses.
 */

/** What the authority needs: the keys, the access-token lifetime and a clock. */
export interface OAuthAuthorityDeps {
  /** Signs access tokens (`sandbox-tokens.ts`). */
  tokenKey: Buffer;
  keys: OAuthKeys;
  accessTokenTtlSeconds: number;
  now: () => number;
}

/** A successful token response (RFC 6749 §5.1). */
export interface TokenResponse {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  refresh_token: string;
}

/** The outcome of a grant at the token endpoint; a failure is always `invalid_grant`. */
export type TokenGrantOutcome = { ok: true; tokens: TokenResponse } | { ok: false; description: string };

/** The outcome of checking a Bearer access token at a connector. */
export type AccessTokenCheck = { ok: true; claims: SandboxTokenClaims } | { ok: false; problem: 'invalid' | 'expired' | 'revoked' };

/** The parameters of an approved authorization request that its code is bound to. */
export interface ApprovedAuthorization {
  client: OAuthClient;
  redirectUri: string;
  codeChallenge: string;
  resource?: string;
}

/** The parameters of an `authorization_code` token request. */
export interface CodeExchange {
  code: string;
  redirectUri: string;
  codeVerifier: string;
  resource?: string;
}

/** RFC 7636 S256: BASE64URL(SHA256(code_verifier)). */
function s256ChallengeOf(codeVerifier: string): string {
  return createHash('sha256').update(codeVerifier).digest('base64url');
}

function fail(description: string): TokenGrantOutcome {
  return { ok: false, description };
}

/** The OAuth authorization server of one sandbox: stateless where it can be (see `GrantState` for the rest). */
export class OAuthAuthority {
  readonly #deps: OAuthAuthorityDeps;
  readonly #state = new GrantState();

  constructor(deps: OAuthAuthorityDeps) {
    this.#deps = deps;
  }

  /** Registers a client (dynamic registration or an owner's app). */
  registerClient(registration: ClientRegistration): RegisteredClient {
    return registerClient(this.#deps.keys, registration, this.#deps.now());
  }

  /** The client a client id names, if it verifies and was registered at this connector. */
  clientAt(connectorKey: string, clientId: string): OAuthClient | undefined {
    const client = verifyClientId(this.#deps.keys, clientId);
    return client?.connectorKey === connectorKey ? client : undefined;
  }

  /** Whether `secret` is the secret of a confidential client. */
  secretMatches(client: OAuthClient, secret: string): boolean {
    return clientSecretMatches(this.#deps.keys, client, secret);
  }

  /** Issues a single-use code (60 s) for an approved request, bound to everything the token request must repeat. */
  issueCode(approved: ApprovedAuthorization, identity: CallerIdentity): string {
    const now = this.#deps.now();
    this.#state.prune(now);
    const code = randomBytes(32).toString('base64url');
    this.#state.addCode(code, {
      connectorKey: approved.client.connectorKey,
      clientId: approved.client.clientId,
      redirectUri: approved.redirectUri,
      codeChallenge: approved.codeChallenge,
      ...(approved.resource !== undefined ? { resource: approved.resource } : {}),
      identity,
      grantId: randomBytes(16).toString('base64url'),
      issuedAtMs: now,
      expiresAtMs: now + AUTHORIZATION_CODE_TTL_MS,
    });
    return code;
  }

  /**
   * `grant_type=authorization_code`: the code must be live and unused, and the request must
   * come from the same client with the same redirect URI, a verifier matching the challenge
   * and the same resource (when both name one). A second use of a code revokes its grant.
   */
  exchangeCode(client: OAuthClient, exchange: CodeExchange): TokenGrantOutcome {
    const now = this.#deps.now();
    const redemption = this.#state.redeemCode(exchange.code, now);
    if (redemption.kind === 'unknown') return fail('The authorization code is invalid or expired');
    if (redemption.kind === 'reused') {
      this.#state.revokeGrant(redemption.code.grantId);
      return fail('The authorization code was already used; the tokens issued for it are revoked');
    }
    const { code } = redemption;
    if (code.connectorKey !== client.connectorKey || code.clientId !== client.clientId) return fail('The authorization code was issued to another client');
    if (code.redirectUri !== exchange.redirectUri) return fail('redirect_uri does not match the authorization request');
    if (!textsMatch(s256ChallengeOf(exchange.codeVerifier), code.codeChallenge)) return fail('code_verifier does not match the code_challenge');
    if (code.resource !== undefined && exchange.resource !== undefined && code.resource !== exchange.resource) return fail('resource does not match the authorization request');
    if (this.#state.isRevoked(code.connectorKey, code.identity.login, code.grantId, code.issuedAtMs)) return fail('The grant was revoked');
    return { ok: true, tokens: this.#issueTokens(client, code.grantId, code.identity, now) };
  }

  /**
   * `grant_type=refresh_token`: a live refresh token of this client whose grant stands and
   * that was not used before. Answers a new access token and a new refresh token; the one
   * presented stops working (rotation).
   */
  refresh(client: OAuthClient, refreshToken: string): TokenGrantOutcome {
    const now = this.#deps.now();
    const claims = verifyRefreshToken(this.#deps.keys.refreshToken, refreshToken);
    if (!claims || claims.svc !== client.connectorKey) return fail('The refresh token is invalid');
    if (claims.cid !== clientFingerprintOf(client.clientId)) return fail('The refresh token was issued to another client');
    if (now >= claims.exp * 1000) return fail('The refresh token expired');
    if (this.#state.isRevoked(claims.svc, claims.login, claims.gid, issuedAtMsOf(claims))) return fail('The grant was revoked');
    if (!this.#state.useRefreshToken(claims.jti, claims.exp * 1000)) return fail('The refresh token was already used');
    const identity: CallerIdentity = claims.name !== undefined ? { login: claims.login, name: claims.name } : { login: claims.login };
    return { ok: true, tokens: this.#issueTokens(client, claims.gid, identity, now) };
  }

  /**
   * RFC 7009: revokes the grant a refresh token of this client, or an OAuth access token of
   * this connector, belongs to. Anything else is ignored, as the RFC asks.
   */
  revokeToken(client: OAuthClient, token: string): void {
    const refresh = verifyRefreshToken(this.#deps.keys.refreshToken, token);
    if (refresh) {
      if (refresh.svc === client.connectorKey && refresh.cid === clientFingerprintOf(client.clientId)) this.#state.revokeGrant(refresh.gid);
      return;
    }
    const access = verifySandboxToken(this.#deps.tokenKey, token);
    if (access?.gid !== undefined && access.svc === client.connectorKey) this.#state.revokeGrant(access.gid);
  }

  /** Test control: the member removed the app at the provider; every grant issued so far stops working. */
  revokeGrantsOf(connectorKey: string, login: string): void {
    this.#state.revokeGrantsOf(connectorKey, login, this.#deps.now());
  }

  /** Test control: every OAuth access token of the member issued so far counts as expired. */
  expireAccessTokensOf(connectorKey: string, login: string): void {
    this.#state.expireAccessTokensOf(connectorKey, login, this.#deps.now());
  }

  /**
   * Checks a Bearer token at a connector: signature and connector, then for OAuth tokens
   * expiry, revocation and the test controls. Fixture tokens (no `exp`, no `gid`) pass
   * the first check only: they never expire and belong to no grant.
   */
  checkAccessToken(connectorKey: string, token: string): AccessTokenCheck {
    const claims = verifySandboxToken(this.#deps.tokenKey, token);
    if (!claims || claims.svc !== connectorKey) return { ok: false, problem: 'invalid' };
    if (claims.exp !== undefined && this.#deps.now() >= claims.exp * 1000) return { ok: false, problem: 'expired' };
    if (claims.gid !== undefined) {
      const issuedAtMs = issuedAtMsOf(claims);
      if (this.#state.isRevoked(connectorKey, claims.login, claims.gid, issuedAtMs)) return { ok: false, problem: 'revoked' };
      if (this.#state.isExpiredByControl(connectorKey, claims.login, issuedAtMs)) return { ok: false, problem: 'expired' };
    }
    return { ok: true, claims };
  }

  /** Forgets in-memory entries that can no longer matter. */
  prune(): void {
    this.#state.prune(this.#deps.now());
  }

  #issueTokens(client: OAuthClient, grantId: string, identity: CallerIdentity, now: number): TokenResponse {
    const { tokenKey, keys, accessTokenTtlSeconds } = this.#deps;
    return {
      access_token: issueGrantAccessToken(tokenKey, client.connectorKey, identity, { grantId, ttlSeconds: accessTokenTtlSeconds }, now),
      token_type: 'Bearer',
      expires_in: accessTokenTtlSeconds,
      refresh_token: issueRefreshToken(keys.refreshToken, { connectorKey: client.connectorKey, clientId: client.clientId, grantId, identity }, now),
    };
  }
}
