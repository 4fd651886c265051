import { describe, expect, it } from 'vitest';
import { readAuthorizationRequest, signAuthorizationRequest, type PendingAuthorization } from './authorization-request.ts';

const request: PendingAuthorization = {
  clientId: '7f0c2a1e-2b1a-4c1e-9a55-0d3c8c1f2e10', redirectUri: 'http://127.0.0.1:1/cb', codeChallenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
  state: 's', resource: 'https://gw.example/mcp', expiresAt: 1_000_000,
};

describe('the pending authorization request carried in the consent URL', () => {
  it('reads back what was signed until it expires', () => {
    const signed = signAuthorizationRequest('secret-a', request);
    expect(readAuthorizationRequest('secret-a', signed, 999_999)).toEqual(request);
    expect(readAuthorizationRequest('secret-a', signed, 1_000_000)).toBeUndefined();
  });

  it('refuses another secret, a changed body or a damaged value', () => {
    const signed = signAuthorizationRequest('secret-a', request);
    expect(readAuthorizationRequest('secret-b', signed, 0)).toBeUndefined();
    const [, mac] = signed.split('.');
    const forged = Buffer.from(JSON.stringify({ ...request, redirectUri: 'https://evil.example/cb' })).toString('base64url');
    expect(readAuthorizationRequest('secret-a', `${forged}.${mac}`, 0)).toBeUndefined();
    for (const junk of ['', '.', 'abc', `${signed}.x`, signed.slice(0, -2)]) expect(readAuthorizationRequest('secret-a', junk, 0)).toBeUndefined();
  });
});
