import { refreshAuthorization } from '@modelcontextprotocol/sdk/client/auth.js';
import { InvalidGrantError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type { OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox, type SandboxApp } from '../sandbox.ts';
import {
  authorizeMember,
  basicAuthorization,
  consentTo,
  identitySeenBy,
  initializeWith,
  issuerOf,
  metadataOf,
  openConsentPage,
  postForm,
  postJson,
  REDIRECT_URI,
  startAt,
  submitConsent,
} from './oauth-test-helpers.ts';

const SECRET = 'sandbox-oauth-endpoints-secret-012345';
const CHALLENGE = 'E9Melhoe2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM';

let sandbox: Sandbox;
let app: SandboxApp;

beforeAll(async () => {
  sandbox = await startSandbox({ secret: SECRET });
  app = sandbox.registerApp('github', [REDIRECT_URI, 'https://portcullis.example/callback']);
});

afterAll(async () => {
  await sandbox.close();
});

function appInformation(target: SandboxApp = app): { client_id: string; client_secret: string } {
  return { client_id: target.clientId, client_secret: target.clientSecret };
}

/** An authorization URL of github with these parameters (the app's, unless overridden; null drops one). */
function authorizeUrl(overrides: Record<string, string | null> = {}): string {
  const params: Record<string, string | null> = {
    response_type: 'code',
    client_id: app.clientId,
    redirect_uri: REDIRECT_URI,
    state: 's-1',
    code_challenge: CHALLENGE,
    code_challenge_method: 'S256',
    ...overrides,
  };
  const search = new URLSearchParams(Object.entries(params).filter((entry): entry is [string, string] => entry[1] !== null));
  return `${sandbox.url}/github/oauth/authorize?${search}`;
}

/** A code of github for `login`, with the verifier it needs. */
async function codeFor(login: string, client: SandboxApp = app): Promise<{ code: string; codeVerifier: string }> {
  const { authorizationUrl, codeVerifier } = await startAt(sandbox, 'github', await metadataOf(sandbox, 'github'), appInformation(client));
  const redirect = await consentTo(authorizationUrl, { login });
  return { code: redirect.searchParams.get('code')!, codeVerifier };
}

function tokenRequest(params: Record<string, string>, client: SandboxApp = app): Promise<Response> {
  return postForm(`${sandbox.url}/github/oauth/token`, params, { authorization: basicAuthorization(client.clientId, client.clientSecret) });
}

async function expectOAuthError(response: Response, status: number, error: string): Promise<void> {
  expect(response.status).toBe(status);
  expect(await response.json()).toMatchObject({ error, error_description: expect.any(String) });
}

async function expectInvalidToken(response: Response, description: RegExp): Promise<void> {
  expect(response.status).toBe(401);
  const challenge = response.headers.get('www-authenticate') ?? '';
  expect(challenge).toMatch(/^Bearer error="invalid_token", error_description="[^"]+"/);
  expect(challenge).toMatch(description);
}

describe('authorization endpoint', () => {
  it('refuses a redirect_uri that is not registered exactly, with a page and no redirect', async () => {
    for (const redirectUri of ['http://127.0.0.1:10/oauth/callback', `${REDIRECT_URI}/`, 'https://attacker.example/callback']) {
      const response = await fetch(authorizeUrl({ redirect_uri: redirectUri }), { redirect: 'manual' });
      expect(response.status, redirectUri).toBe(400);
      expect(response.headers.get('location')).toBeNull();
      expect(response.headers.get('content-type')).toBe('text/html; charset=utf-8');
      expect(await response.text()).toContain('redirect_uri is not one the client registered');
    }
    expect((await fetch(authorizeUrl({ redirect_uri: null }), { redirect: 'manual' })).status).toBe(400);
  });

  it('refuses an unknown client, and a client of another connector, with a page', async () => {
    const slackApp = sandbox.registerApp('slack', [REDIRECT_URI]);
    for (const clientId of ['sbc_forged.AAAA', slackApp.clientId, '']) {
      const response = await fetch(authorizeUrl({ client_id: clientId }), { redirect: 'manual' });
      expect(response.status, clientId).toBe(400);
      expect(response.headers.get('location')).toBeNull();
    }
  });

  it('redirects protocol errors to the verified redirect URI with the state', async () => {
    const cases: Array<[Record<string, string | null>, string]> = [
      [{ code_challenge: null }, 'invalid_request'],
      [{ code_challenge_method: 'plain' }, 'invalid_request'],
      [{ code_challenge_method: null }, 'invalid_request'],
      [{ code_challenge: 'too-short' }, 'invalid_request'],
      [{ response_type: 'token' }, 'unsupported_response_type'],
      [{ resource: 'http://elsewhere.example/mcp' }, 'invalid_target'],
    ];
    for (const [overrides, error] of cases) {
      const response = await fetch(authorizeUrl(overrides), { redirect: 'manual' });
      expect(response.status, JSON.stringify(overrides)).toBe(302);
      const location = new URL(response.headers.get('location')!);
      expect(`${location.origin}${location.pathname}`).toBe(REDIRECT_URI);
      expect(location.searchParams.get('error')).toBe(error);
      expect(location.searchParams.get('state')).toBe('s-1');
    }
  });

  it('redirects a denial as access_denied', async () => {
    const redirect = await consentTo(authorizeUrl(), { decision: 'deny' });
    expect(redirect.searchParams.get('error')).toBe('access_denied');
    expect(redirect.searchParams.get('state')).toBe('s-1');
    expect(redirect.searchParams.has('code')).toBe(false);
  });

  it('shows the page again for an approval without a login, and escapes what it echoes', async () => {
    const form = await openConsentPage(authorizeUrl({ state: '"><script>alert(1)</script>' }));
    expect(form.html).not.toContain('<script>');
    expect(form.fields.state).toBe('"><script>alert(1)</script>');
    const response = await submitConsent(form, { login: '   ' });
    expect(response.status).toBe(400);
    expect(response.headers.get('location')).toBeNull();
    expect(await response.text()).toContain('role="alert"');
    // The form carries the state back unchanged.
    const redirect = await consentTo(authorizeUrl({ state: '"><script>alert(1)</script>' }), { login: 'alice' });
    expect(redirect.searchParams.get('state')).toBe('"><script>alert(1)</script>');
  });

  it('refuses a consent POST that is not a form, or names an unregistered redirect URI', async () => {
    const notForm = await fetch(`${sandbox.url}/github/oauth/authorize`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}', redirect: 'manual' });
    expect(notForm.status).toBe(400);
    const form = await openConsentPage(authorizeUrl());
    const tampered = await submitConsent({ ...form, fields: { ...form.fields, redirect_uri: 'https://attacker.example/callback' } }, { login: 'alice' });
    expect(tampered.status).toBe(400);
    expect(tampered.headers.get('location')).toBeNull();
  });
});

describe('token endpoint', () => {
  it('refuses a wrong PKCE verifier with invalid_grant', async () => {
    const { code } = await codeFor('alice');
    await expectOAuthError(await tokenRequest({ grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, code_verifier: 'x'.repeat(43) }), 400, 'invalid_grant');
  });

  it('refuses a code used twice, and revokes what the first use issued', async () => {
    const { code, codeVerifier } = await codeFor('alice');
    const params = { grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, code_verifier: codeVerifier };
    const first = await tokenRequest(params);
    expect(first.status).toBe(200);
    expect(first.headers.get('cache-control')).toBe('no-store');
    const tokens = (await first.json()) as OAuthTokens;
    await expectOAuthError(await tokenRequest(params), 400, 'invalid_grant');
    await expectInvalidToken(await initializeWith(sandbox, 'github', tokens.access_token), /revoked/);
  });

  it('binds a code to its redirect URI and its client', async () => {
    const other = sandbox.registerApp('github', [REDIRECT_URI]);
    const first = await codeFor('alice');
    await expectOAuthError(await tokenRequest({ grant_type: 'authorization_code', code: first.code, redirect_uri: 'https://portcullis.example/callback', code_verifier: first.codeVerifier }), 400, 'invalid_grant');
    const second = await codeFor('alice');
    await expectOAuthError(await tokenRequest({ grant_type: 'authorization_code', code: second.code, redirect_uri: REDIRECT_URI, code_verifier: second.codeVerifier }, other), 400, 'invalid_grant');
  });

  it('refuses a wrong client secret, an unknown client and a missing authentication with 401 invalid_client', async () => {
    const { code, codeVerifier } = await codeFor('alice');
    const params = { grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, code_verifier: codeVerifier };
    const wrongSecret = await postForm(`${sandbox.url}/github/oauth/token`, params, { authorization: basicAuthorization(app.clientId, 'sbs_wrong') });
    expect(wrongSecret.headers.get('www-authenticate')).toMatch(/^Basic realm=/);
    await expectOAuthError(wrongSecret, 401, 'invalid_client');
    await expectOAuthError(await postForm(`${sandbox.url}/github/oauth/token`, { ...params, client_id: app.clientId, client_secret: 'sbs_wrong' }), 401, 'invalid_client');
    await expectOAuthError(await postForm(`${sandbox.url}/github/oauth/token`, { ...params, client_id: 'sbc_unknown.AAAA', client_secret: 'x' }), 401, 'invalid_client');
    await expectOAuthError(await postForm(`${sandbox.url}/github/oauth/token`, params), 401, 'invalid_client');
    await expectOAuthError(await postForm(`${sandbox.url}/github/oauth/token`, params, { authorization: 'Basic !!!' }), 401, 'invalid_client');
    // A confidential client of another connector is unknown here.
    const slackApp = sandbox.registerApp('slack', [REDIRECT_URI]);
    await expectOAuthError(await tokenRequest(params, slackApp), 401, 'invalid_client');
  });

  it('refuses malformed requests with 400', async () => {
    await expectOAuthError(await tokenRequest({ grant_type: 'client_credentials' }), 400, 'unsupported_grant_type');
    await expectOAuthError(await tokenRequest({}), 400, 'invalid_request');
    await expectOAuthError(await tokenRequest({ grant_type: 'authorization_code', code: 'abc' }), 400, 'invalid_request');
    await expectOAuthError(await tokenRequest({ grant_type: 'refresh_token', refresh_token: 'sbr_forged.AAAA' }), 400, 'invalid_grant');
    await expectOAuthError(await tokenRequest({ grant_type: 'refresh_token', refresh_token: 'r', resource: 'http://elsewhere.example/mcp' }), 400, 'invalid_target');
    const both = await postForm(`${sandbox.url}/github/oauth/token`, { grant_type: 'refresh_token', refresh_token: 'r', client_secret: app.clientSecret }, { authorization: basicAuthorization(app.clientId, app.clientSecret) });
    await expectOAuthError(both, 400, 'invalid_request');
    const json = await fetch(`${sandbox.url}/github/oauth/token`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: basicAuthorization(app.clientId, app.clientSecret) }, body: '{}' });
    await expectOAuthError(json, 400, 'invalid_request');
    const twice = await fetch(`${sandbox.url}/github/oauth/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'grant_type=refresh_token&grant_type=authorization_code' });
    await expectOAuthError(twice, 400, 'invalid_request');
    expect((await fetch(`${sandbox.url}/github/oauth/token`)).status).toBe(405);
  });

  it('refuses a refresh token at another client', async () => {
    const tokens = await authorizeMember(sandbox, 'github', appInformation(), { login: 'alice' });
    const other = sandbox.registerApp('github', [REDIRECT_URI]);
    await expectOAuthError(await tokenRequest({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }, other), 400, 'invalid_grant');
  });
});

describe('dynamic client registration', () => {
  const register = (body: unknown): Promise<Response> => postJson(`${sandbox.url}/linear/oauth/register`, body);

  it('refuses missing or unusable redirect URIs with invalid_redirect_uri', async () => {
    for (const body of [{}, { redirect_uris: [] }, { redirect_uris: ['javascript:alert(1)'] }, { redirect_uris: ['/relative'] }, { redirect_uris: ['https://x.example/cb#frag'] }, { redirect_uris: 'https://x.example/cb' }]) {
      await expectOAuthError(await register(body), 400, 'invalid_redirect_uri');
    }
  });

  it('refuses other bad metadata with invalid_client_metadata, and ignores metadata it does not know', async () => {
    await expectOAuthError(await register({ redirect_uris: [REDIRECT_URI], token_endpoint_auth_method: 'private_key_jwt' }), 400, 'invalid_client_metadata');
    await expectOAuthError(await register({ redirect_uris: [REDIRECT_URI], grant_types: ['client_credentials'] }), 400, 'invalid_client_metadata');
    await expectOAuthError(await register({ redirect_uris: [REDIRECT_URI], response_types: ['token'] }), 400, 'invalid_client_metadata');
    await expectOAuthError(await register('not json'), 400, 'invalid_client_metadata');
    await expectOAuthError(await register([REDIRECT_URI]), 400, 'invalid_client_metadata');
    const accepted = await register({ redirect_uris: [REDIRECT_URI], token_endpoint_auth_method: 'client_secret_post', logo_uri: 'https://x.example/logo.png', scope: 'read' });
    expect(accepted.status).toBe(201);
    expect(accepted.headers.get('cache-control')).toBe('no-store');
    expect(await accepted.json()).toMatchObject({ token_endpoint_auth_method: 'client_secret_post', client_secret: expect.any(String) });
  });
});

describe('revocation and userinfo', () => {
  it('revokes the whole grant of a refresh token', async () => {
    const tokens = await authorizeMember(sandbox, 'github', appInformation(), { login: 'carol' });
    const revoked = await postForm(`${sandbox.url}/github/oauth/revoke`, { token: tokens.refresh_token! }, { authorization: basicAuthorization(app.clientId, app.clientSecret) });
    expect(revoked.status).toBe(200);
    expect(await revoked.text()).toBe('');
    await expectOAuthError(await tokenRequest({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }), 400, 'invalid_grant');
    await expectInvalidToken(await initializeWith(sandbox, 'github', tokens.access_token), /revoked/);
  });

  it('revokes the grant of an access token, answers 200 for unknown tokens, and needs client authentication', async () => {
    const tokens = await authorizeMember(sandbox, 'github', appInformation(), { login: 'carol' });
    const revokeWith = (token: string): Promise<Response> => postForm(`${sandbox.url}/github/oauth/revoke`, { token }, { authorization: basicAuthorization(app.clientId, app.clientSecret) });
    expect((await revokeWith(tokens.access_token)).status).toBe(200);
    await expectOAuthError(await tokenRequest({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }), 400, 'invalid_grant');
    expect((await revokeWith('not-a-token')).status).toBe(200);
    await expectOAuthError(await postForm(`${sandbox.url}/github/oauth/revoke`, { token: tokens.access_token }), 401, 'invalid_client');
    await expectOAuthError(await postForm(`${sandbox.url}/github/oauth/revoke`, {}, { authorization: basicAuthorization(app.clientId, app.clientSecret) }), 400, 'invalid_request');
  });

  it('answers userinfo for fixture tokens too, and 401 without a valid token', async () => {
    const fixture = sandbox.issueToken('github', { login: 'dave' });
    const userinfo = await fetch(`${sandbox.url}/github/oauth/userinfo`, { headers: { authorization: `Bearer ${fixture}` } });
    expect(await userinfo.json()).toEqual({ sub: 'dave', preferred_username: 'dave' });
    const missing = await fetch(`${sandbox.url}/github/oauth/userinfo`);
    expect(missing.status).toBe(401);
    expect(missing.headers.get('www-authenticate')).toBe('Bearer');
    await expectInvalidToken(await fetch(`${sandbox.url}/slack/oauth/userinfo`, { headers: { authorization: `Bearer ${fixture}` } }), /invalid or not for this connector/);
  });
});

describe('test controls', () => {
  it('expire-tokens: access tokens so far answer 401 expired at MCP and userinfo; refreshing still works', async () => {
    const tokens = await authorizeMember(sandbox, 'github', appInformation(), { login: 'erin' });
    const bystander = await authorizeMember(sandbox, 'github', appInformation(), { login: 'frank' });
    const fixture = sandbox.issueToken('github', { login: 'erin' });
    const response = await postJson(`${sandbox.url}/_sandbox/github/expire-tokens`, { login: 'erin' });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ expired: true });

    const mcp = await initializeWith(sandbox, 'github', tokens.access_token);
    await expectInvalidToken(mcp, /error_description="The access token expired"/);
    expect(mcp.headers.get('www-authenticate')).toContain(`resource_metadata="${sandbox.url}/.well-known/oauth-protected-resource/github/mcp"`);
    expect(await mcp.json()).toEqual({ error: 'invalid_token', error_description: 'The access token expired' });
    await expectInvalidToken(await fetch(`${sandbox.url}/github/oauth/userinfo`, { headers: { authorization: `Bearer ${tokens.access_token}` } }), /expired/);

    const refreshed = await refreshAuthorization(issuerOf(sandbox, 'github'), { metadata: await metadataOf(sandbox, 'github'), clientInformation: appInformation(), refreshToken: tokens.refresh_token! });
    expect(await identitySeenBy(sandbox, 'github', 'get_me', refreshed.access_token)).toEqual({ login: 'erin' });
    // Another member, and fixture tokens (which never expire), are untouched.
    expect(await identitySeenBy(sandbox, 'github', 'get_me', bystander.access_token)).toEqual({ login: 'frank' });
    expect(await identitySeenBy(sandbox, 'github', 'get_me', fixture)).toEqual({ login: 'erin' });
  });

  it('revoke-grants: access and refresh tokens so far stop working; a new authorization works', async () => {
    const metadata = await metadataOf(sandbox, 'github');
    const tokens = await authorizeMember(sandbox, 'github', appInformation(), { login: 'gina' });
    const response = await postJson(`${sandbox.url}/_sandbox/github/revoke-grants`, { login: 'gina' });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ revoked: true });
    await expectInvalidToken(await initializeWith(sandbox, 'github', tokens.access_token), /revoked/);
    await expect(refreshAuthorization(issuerOf(sandbox, 'github'), { metadata, clientInformation: appInformation(), refreshToken: tokens.refresh_token! })).rejects.toBeInstanceOf(InvalidGrantError);

    const again = await authorizeMember(sandbox, 'github', appInformation(), { login: 'gina' });
    expect(await identitySeenBy(sandbox, 'github', 'get_me', again.access_token)).toEqual({ login: 'gina' });
  });

  it('revoke-grants also stops a code issued before it', async () => {
    const { code, codeVerifier } = await codeFor('hana');
    sandbox.revokeGrants('github', 'hana');
    await expectOAuthError(await tokenRequest({ grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, code_verifier: codeVerifier }), 400, 'invalid_grant');
  });

  it('are methods of the sandbox too', async () => {
    const tokens = await authorizeMember(sandbox, 'github', appInformation(), { login: 'ivan' });
    sandbox.expireAccessTokens('github', 'ivan');
    await expectInvalidToken(await initializeWith(sandbox, 'github', tokens.access_token), /expired/);
    sandbox.revokeGrants('github', 'ivan');
    await expectOAuthError(await tokenRequest({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }), 400, 'invalid_grant');
    expect(() => sandbox.revokeGrants('nosuchservice', 'ivan')).toThrow(/unknown connector/);
    expect(() => sandbox.expireAccessTokens('github', ' ')).toThrow(/login/);
    expect(() => sandbox.registerApp('github', [])).toThrow(/redirect/);
    expect(() => sandbox.registerApp('github', ['ftp://x.example/cb'])).toThrow(/redirect_uris/);
  });

  it('refuse bad requests like the tokens route', async () => {
    for (const [path, body] of [
      ['revoke-grants', '{}'],
      ['expire-tokens', '{"login":""}'],
      ['revoke-grants', '{"login":"a","extra":1}'],
      ['apps', '{"redirect_uris":[]}'],
      ['apps', '{"redirect_uris":["http://x.example/cb"],"token_endpoint_auth_method":"none"}'],
      ['apps', 'not json'],
    ] as const) {
      const response = await postJson(`${sandbox.url}/_sandbox/github/${path}`, body);
      expect(response.status, `${path} ${body}`).toBe(400);
      expect(await response.json()).toMatchObject({ error: 'invalid_request', error_description: expect.any(String) });
    }
    expect((await postJson(`${sandbox.url}/_sandbox/nosuchservice/apps`, { redirect_uris: [REDIRECT_URI] })).status).toBe(404);
    expect((await fetch(`${sandbox.url}/_sandbox/github/revoke-grants`)).status).toBe(405);
  });

  it('accessTokenTtlSeconds: tokens expire on their own', async () => {
    const shortLived = await startSandbox({ secret: SECRET, accessTokenTtlSeconds: 1 });
    try {
      const tokens = await authorizeMember(shortLived, 'github', appInformation(), { login: 'jo' });
      expect(tokens.expires_in).toBe(1);
      expect((await initializeWith(shortLived, 'github', tokens.access_token)).status).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, 2100));
      await expectInvalidToken(await initializeWith(shortLived, 'github', tokens.access_token), /expired/);
    } finally {
      await shortLived.close();
    }
    await expect(startSandbox({ secret: SECRET, accessTokenTtlSeconds: 0 })).rejects.toThrow(/accessTokenTtlSeconds/);
  });
});
