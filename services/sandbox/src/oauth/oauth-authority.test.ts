import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { deriveTokenKey, issueSandboxToken } from '../sandbox-tokens.ts';
import { OAuthAuthority } from './oauth-authority.ts';
import type { OAuthClient } from './oauth-clients.ts';
import { deriveOAuthKeys } from './oauth-keys.ts';

const SECRET = 'oauth-authority-test-secret-0123456789';
const VERIFIER = 'v'.repeat(43);
const CHALLENGE = createHash('sha256').update(VERIFIER).digest('base64url');
const REDIRECT = 'http://127.0.0.1:9/cb';

/** An authority on a clock the test moves. */
function authorityAt(start = Date.UTC(2026, 0, 1)): { authority: OAuthAuthority; clock: { now: number }; client: OAuthClient } {
  const clock = { now: start };
  const authority = new OAuthAuthority({ tokenKey: deriveTokenKey(SECRET), keys: deriveOAuthKeys(SECRET), accessTokenTtlSeconds: 3600, now: () => clock.now });
  const { client } = authority.registerClient({ connectorKey: 'linear', kind: 'dynamic', redirectUris: [REDIRECT], authMethod: 'client_secret_basic' });
  return { authority, clock, client };
}

function codeOf(authority: OAuthAuthority, client: OAuthClient, login = 'erin'): string {
  return authority.issueCode({ client, redirectUri: REDIRECT, codeChallenge: CHALLENGE }, { login });
}

describe('OAuthAuthority', () => {
  it('lets a code live 60 seconds', () => {
    const { authority, clock, client } = authorityAt();
    const fresh = codeOf(authority, client);
    const stale = codeOf(authority, client);
    clock.now += 59_999;
    expect(authority.exchangeCode(client, { code: fresh, redirectUri: REDIRECT, codeVerifier: VERIFIER }).ok).toBe(true);
    clock.now += 1;
    expect(authority.exchangeCode(client, { code: stale, redirectUri: REDIRECT, codeVerifier: VERIFIER })).toEqual({ ok: false, description: 'The authorization code is invalid or expired' });
  });

  it('lets access tokens live their lifetime, and refresh tokens 30 days', () => {
    const { authority, clock, client } = authorityAt();
    const outcome = authority.exchangeCode(client, { code: codeOf(authority, client), redirectUri: REDIRECT, codeVerifier: VERIFIER });
    if (!outcome.ok) throw new Error(outcome.description);
    const { access_token, refresh_token } = outcome.tokens;
    clock.now += 3_599_000;
    expect(authority.checkAccessToken('linear', access_token)).toMatchObject({ ok: true, claims: { login: 'erin', gid: expect.any(String) } });
    clock.now += 1_000;
    expect(authority.checkAccessToken('linear', access_token)).toEqual({ ok: false, problem: 'expired' });
    expect(authority.checkAccessToken('slack', access_token)).toEqual({ ok: false, problem: 'invalid' });
    clock.now += 30 * 24 * 3_600_000;
    expect(authority.refresh(client, refresh_token)).toEqual({ ok: false, description: 'The refresh token expired' });
  });

  it('tells apart tokens issued just before and just after a test control', () => {
    const { authority, clock, client } = authorityAt();
    const before = authority.exchangeCode(client, { code: codeOf(authority, client), redirectUri: REDIRECT, codeVerifier: VERIFIER });
    clock.now += 1;
    authority.expireAccessTokensOf('linear', 'erin');
    clock.now += 1;
    const after = authority.exchangeCode(client, { code: codeOf(authority, client), redirectUri: REDIRECT, codeVerifier: VERIFIER });
    if (!before.ok || !after.ok) throw new Error('exchange failed');
    expect(authority.checkAccessToken('linear', before.tokens.access_token)).toEqual({ ok: false, problem: 'expired' });
    expect(authority.checkAccessToken('linear', after.tokens.access_token).ok).toBe(true);
    // Expiry spares refresh tokens; revocation does not.
    expect(authority.refresh(client, before.tokens.refresh_token).ok).toBe(true);
    clock.now += 1;
    authority.revokeGrantsOf('linear', 'erin');
    expect(authority.refresh(client, after.tokens.refresh_token)).toEqual({ ok: false, description: 'The grant was revoked' });
    expect(authority.checkAccessToken('linear', after.tokens.access_token)).toEqual({ ok: false, problem: 'revoked' });
  });

  it('keeps fixture tokens out of expiry and grants', () => {
    const { authority, clock } = authorityAt();
    const fixture = issueSandboxToken(deriveTokenKey(SECRET), 'linear', { login: 'erin' }, clock.now);
    clock.now += 365 * 24 * 3_600_000;
    authority.revokeGrantsOf('linear', 'erin');
    authority.expireAccessTokensOf('linear', 'erin');
    expect(authority.checkAccessToken('linear', fixture)).toMatchObject({ ok: true, claims: { login: 'erin' } });
  });
});
