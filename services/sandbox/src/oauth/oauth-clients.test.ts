import { describe, expect, it } from 'vitest';
import { deriveOAuthKeys } from './oauth-keys.ts';
import { clientSecretMatches, isRedirectUri, registerClient, verifyClientId } from './oauth-clients.ts';

const keys = deriveOAuthKeys('oauth-clients-test-secret-0123456789ab');
const registration = { connectorKey: 'linear', kind: 'dynamic' as const, redirectUris: ['http://127.0.0.1:3000/cb'], authMethod: 'client_secret_basic' as const, name: 'Test' };

describe('sandbox OAuth clients', () => {
  it('read back from their id alone, with a secret derived from the id', () => {
    const { client, clientSecret } = registerClient(keys, registration, Date.UTC(2026, 0, 1));
    expect(verifyClientId(keys, client.clientId)).toEqual({ ...client, issuedAt: Date.UTC(2026, 0, 1) / 1000 });
    expect(clientSecretMatches(keys, client, clientSecret!)).toBe(true);
    expect(clientSecretMatches(keys, client, `${clientSecret!}x`)).toBe(false);
    // Under another secret neither the id nor the secret opens.
    const otherKeys = deriveOAuthKeys('another-oauth-clients-secret-0123456');
    expect(verifyClientId(otherKeys, client.clientId)).toBeUndefined();
  });

  it('never share an id or a secret, even with the same metadata', () => {
    const a = registerClient(keys, registration);
    const b = registerClient(keys, registration);
    expect(a.client.clientId).not.toBe(b.client.clientId);
    expect(a.clientSecret).not.toBe(b.clientSecret);
    expect(clientSecretMatches(keys, b.client, a.clientSecret!)).toBe(false);
  });

  it('give public clients no secret, and accept none for them', () => {
    const { client, clientSecret } = registerClient(keys, { ...registration, authMethod: 'none' });
    expect(clientSecret).toBeUndefined();
    expect(clientSecretMatches(keys, client, '')).toBe(false);
  });

  it('reject ids that were changed, forged or are not client ids', () => {
    const { client } = registerClient(keys, registration);
    const [payload, signature] = client.clientId.slice('sbc_'.length).split('.') as [string, string];
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Record<string, unknown>;
    const widened = Buffer.from(JSON.stringify({ ...claims, uris: ['https://attacker.example/cb'] })).toString('base64url');
    for (const bad of [`sbc_${widened}.${signature}`, client.clientId.replace('sbc_', 'sbr_'), 'sbc_', '', `${client.clientId}x`]) {
      expect(verifyClientId(keys, bad), bad).toBeUndefined();
    }
  });

  it('take only absolute http(s) redirect URIs without a fragment', () => {
    expect(isRedirectUri('http://127.0.0.1:9/cb')).toBe(true);
    expect(isRedirectUri('https://app.example/cb?x=1')).toBe(true);
    for (const bad of ['/cb', 'javascript:alert(1)', 'custom-scheme://cb', 'https://app.example/cb#x', 'https://app.example/cb#', `https://app.example/${'a'.repeat(2000)}`]) {
      expect(isRedirectUri(bad), bad).toBe(false);
    }
  });
});
