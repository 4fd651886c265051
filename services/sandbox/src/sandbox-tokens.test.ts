import { describe, expect, it } from 'vitest';
import { bearerTokenOf, deriveTokenKey, issueGrantAccessToken, issuedAtMsOf, issueSandboxToken, verifySandboxToken } from './sandbox-tokens.ts';
import { signClaims } from './signed-token.ts';

const key = deriveTokenKey('a-secret-of-at-least-thirty-two-characters');

describe('sandbox tokens', () => {
  it('round-trips the connector and the identity', () => {
    const token = issueSandboxToken(key, 'github', { login: 'alice', name: 'Alice Doe' }, Date.UTC(2026, 0, 1));
    expect(token).toMatch(/^sbx_[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
    expect(verifySandboxToken(key, token)).toEqual({ svc: 'github', login: 'alice', name: 'Alice Doe', iat: Date.UTC(2026, 0, 1) / 1000 });
  });

  it('leaves the name out when there is none', () => {
    const claims = verifySandboxToken(key, issueSandboxToken(key, 'slack', { login: 'bob' }));
    expect(claims).toMatchObject({ svc: 'slack', login: 'bob' });
    expect(claims).not.toHaveProperty('name');
  });

  it('derives the same key from the same secret and another key from another secret', () => {
    const token = issueSandboxToken(key, 'github', { login: 'alice' });
    expect(verifySandboxToken(deriveTokenKey('a-secret-of-at-least-thirty-two-characters'), token)).toBeDefined();
    expect(verifySandboxToken(deriveTokenKey('another-secret-of-thirty-two-characters!'), token)).toBeUndefined();
  });

  it('rejects a payload changed after signing', () => {
    const token = issueSandboxToken(key, 'github', { login: 'alice' });
    const [payload, signature] = token.slice('sbx_'.length).split('.') as [string, string];
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Record<string, unknown>;
    const forged = Buffer.from(JSON.stringify({ ...claims, login: 'mallory' })).toString('base64url');
    expect(verifySandboxToken(key, `sbx_${forged}.${signature}`)).toBeUndefined();
  });

  it('rejects malformed tokens', () => {
    const token = issueSandboxToken(key, 'github', { login: 'alice' });
    for (const bad of ['', 'sbx_', 'sbx_abc', token.slice(4), `${token}x`, `${token}=`, token.replace('sbx_', 'pcm_'), 'sbx_e30.AAAA']) {
      expect(verifySandboxToken(key, bad), bad).toBeUndefined();
    }
  });

  it('reads only Bearer authorization headers', () => {
    expect(bearerTokenOf('Bearer abc')).toBe('abc');
    expect(bearerTokenOf('bearer abc')).toBe('abc');
    expect(bearerTokenOf('Basic abc')).toBeUndefined();
    expect(bearerTokenOf('Bearer')).toBeUndefined();
    expect(bearerTokenOf('Bearer a b')).toBeUndefined();
    expect(bearerTokenOf(undefined)).toBeUndefined();
  });

  it('refuses an empty secret', () => {
    expect(() => deriveTokenKey('')).toThrow(/secret/);
  });
});

describe('sandbox OAuth access tokens', () => {
  it('carry the grant, an expiry no sooner than the lifetime, and the issue time to the millisecond', () => {
    const now = Date.UTC(2026, 0, 1) + 1_234;
    const token = issueGrantAccessToken(key, 'linear', { login: 'erin', name: 'Erin' }, { grantId: 'g-1', ttlSeconds: 60 }, now);
    const claims = verifySandboxToken(key, token);
    expect(claims).toEqual({ svc: 'linear', login: 'erin', name: 'Erin', iat: now / 1000, exp: Math.ceil(now / 1000) + 60, gid: 'g-1' });
    expect(issuedAtMsOf(claims!)).toBe(now);
  });

  it('reject mistyped grant claims', () => {
    for (const claims of [{ svc: 'linear', login: 'erin', iat: 1, exp: '2' }, { svc: 'linear', login: 'erin', iat: 1, gid: '' }, { svc: 'linear', login: 'erin', iat: 1, gid: 7 }]) {
      expect(verifySandboxToken(key, signClaims('sbx_', key, claims)), JSON.stringify(claims)).toBeUndefined();
    }
  });
});
