import {
  auth,
  discoverAuthorizationServerMetadata,
  discoverOAuthProtectedResourceMetadata,
  exchangeAuthorization,
  extractWWWAuthenticateParams,
  refreshAuthorization,
  registerClient,
  type OAuthClientProvider,
} from '@modelcontextprotocol/sdk/client/auth.js';
import { InvalidGrantError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type { OAuthClientInformationMixed, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { connectors } from '@portcullis/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../sandbox.ts';
import {
  authorizeMember,
  basicAuthorization,
  consentTo,
  identitySeenBy,
  issuerOf,
  metadataOf,
  postForm,
  postJson,
  REDIRECT_URI,
  startAt,
} from './oauth-test-helpers.ts';

const SECRET = 'sandbox-oauth-test-secret-0123456789';
const OTHER_SECRET = 'another-sandbox-oauth-secret-98765432';

let sandbox: Sandbox;

beforeAll(async () => {
  sandbox = await startSandbox({ secret: SECRET });
});

afterAll(async () => {
  await sandbox.close();
});

describe('sandbox OAuth discovery', () => {
  it('points a 401 of the MCP endpoint at the protected resource metadata, which names the connector as its authorization server', async () => {
    const unauthorized = await fetch(sandbox.upstreamUrl('linear'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(unauthorized.status).toBe(401);
    const { resourceMetadataUrl } = extractWWWAuthenticateParams(unauthorized);
    expect(resourceMetadataUrl?.href).toBe(`${sandbox.url}/.well-known/oauth-protected-resource/linear/mcp`);

    const resource = await discoverOAuthProtectedResourceMetadata(sandbox.upstreamUrl('linear'));
    expect(resource).toEqual({
      resource: `${sandbox.url}/linear/mcp`,
      authorization_servers: [`${sandbox.url}/linear`],
      bearer_methods_supported: ['header'],
      resource_name: 'Linear (sandbox)',
    });
  });

  it('publishes RFC 8414 metadata at the path-inserted well-known URL, with registration only for managed connectors', async () => {
    const linear = await discoverAuthorizationServerMetadata(`${sandbox.url}/linear`);
    expect(linear).toEqual({
      issuer: `${sandbox.url}/linear`,
      authorization_endpoint: `${sandbox.url}/linear/oauth/authorize`,
      token_endpoint: `${sandbox.url}/linear/oauth/token`,
      revocation_endpoint: `${sandbox.url}/linear/oauth/revoke`,
      userinfo_endpoint: `${sandbox.url}/linear/oauth/userinfo`,
      registration_endpoint: `${sandbox.url}/linear/oauth/register`,
      response_types_supported: ['code'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      code_challenge_methods_supported: ['S256'],
      token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'none'],
    });
    const direct = await fetch(`${sandbox.url}/.well-known/oauth-authorization-server/linear`);
    expect(await direct.json()).toEqual(linear);

    for (const connector of connectors) {
      const metadata = await discoverAuthorizationServerMetadata(`${sandbox.url}/${connector.key}`);
      expect(metadata?.issuer).toBe(`${sandbox.url}/${connector.key}`);
      expect(metadata?.registration_endpoint !== undefined, connector.key).toBe(connector.oauth === 'managed');
      const resource = await discoverOAuthProtectedResourceMetadata(sandbox.upstreamUrl(connector.key));
      expect(resource.resource_name).toBe(`${connector.label} (sandbox)`);
    }
  });
});

describe('sandbox OAuth, managed connector (linear, dynamic registration)', () => {
  it('runs discover → register → consent → code → token → MCP → refresh with rotation', async () => {
    const resource = await discoverOAuthProtectedResourceMetadata(sandbox.upstreamUrl('linear'));
    const issuer = resource.authorization_servers![0]!;
    const metadata = (await discoverAuthorizationServerMetadata(issuer))!;
    const registered = await registerClient(issuer, { metadata, clientMetadata: { redirect_uris: [REDIRECT_URI], client_name: 'Portcullis test' } });
    expect(registered).toMatchObject({
      client_id: expect.stringMatching(/^sbc_/),
      client_secret: expect.stringMatching(/^sbs_/),
      client_id_issued_at: expect.any(Number),
      client_secret_expires_at: 0,
      redirect_uris: [REDIRECT_URI],
      token_endpoint_auth_method: 'client_secret_basic',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      client_name: 'Portcullis test',
    });

    const { authorizationUrl, codeVerifier } = await startAt(sandbox, 'linear', metadata, registered, 'opaque-state');
    const page = await fetch(authorizationUrl);
    const html = await page.text();
    expect(page.status).toBe(200);
    expect(html).toContain('<title>Sign in to Linear (sandbox)</title>');
    expect(html).toContain('<form method="post" action="/linear/oauth/authorize">');
    expect(html).toContain('<label for="login">Login</label><input id="login" name="login" required>');
    expect(html).toContain('<button type="submit" name="decision" value="approve">Authorize</button>');
    expect(html).toContain('Portcullis test');

    const redirect = await consentTo(authorizationUrl, { login: 'erin', name: 'Erin Example' });
    expect(`${redirect.origin}${redirect.pathname}`).toBe(REDIRECT_URI);
    expect(redirect.searchParams.get('state')).toBe('opaque-state');
    const code = redirect.searchParams.get('code')!;
    expect(code).toMatch(/^[A-Za-z0-9_-]{43}$/);

    const tokens = await exchangeAuthorization(issuer, { metadata, clientInformation: registered, authorizationCode: code, codeVerifier, redirectUri: REDIRECT_URI, resource: new URL(resource.resource) });
    expect(tokens).toEqual({ access_token: expect.stringMatching(/^sbx_/), token_type: 'Bearer', expires_in: 3600, refresh_token: expect.stringMatching(/^sbr_/) });
    expect(await identitySeenBy(sandbox, 'linear', 'list_teams', tokens.access_token)).toEqual({ login: 'erin', name: 'Erin Example' });

    const userinfo = await fetch(metadata.userinfo_endpoint as string, { headers: { authorization: `Bearer ${tokens.access_token}` } });
    expect(await userinfo.json()).toEqual({ sub: 'erin', preferred_username: 'erin', name: 'Erin Example' });

    const refreshed = await refreshAuthorization(issuer, { metadata, clientInformation: registered, refreshToken: tokens.refresh_token! });
    expect(refreshed.refresh_token).not.toBe(tokens.refresh_token);
    expect(refreshed.access_token).not.toBe(tokens.access_token);
    expect(await identitySeenBy(sandbox, 'linear', 'list_teams', refreshed.access_token)).toEqual({ login: 'erin', name: 'Erin Example' });
    await expect(refreshAuthorization(issuer, { metadata, clientInformation: registered, refreshToken: tokens.refresh_token! })).rejects.toBeInstanceOf(InvalidGrantError);
    // The rotated one works once too.
    expect((await refreshAuthorization(issuer, { metadata, clientInformation: registered, refreshToken: refreshed.refresh_token! })).access_token).toMatch(/^sbx_/);
  });

  it('serves a public client (token_endpoint_auth_method none) by client_id alone', async () => {
    const metadata = await metadataOf(sandbox, 'notion');
    const registered = await registerClient(issuerOf(sandbox, 'notion'), { metadata, clientMetadata: { redirect_uris: [REDIRECT_URI], token_endpoint_auth_method: 'none' } });
    expect(registered).not.toHaveProperty('client_secret');
    expect(registered.token_endpoint_auth_method).toBe('none');
    const tokens = await authorizeMember(sandbox, 'notion', registered, { login: 'frank' });
    expect(await identitySeenBy(sandbox, 'notion', 'notion-get-users', tokens.access_token)).toEqual({ login: 'frank' });
  });

  it('completes the SDK auth() orchestrator, which registers, redirects and exchanges on its own', async () => {
    const saved: { client?: OAuthClientInformationMixed; tokens?: OAuthTokens; verifier?: string; redirectedTo?: URL } = {};
    const provider: OAuthClientProvider = {
      redirectUrl: REDIRECT_URI,
      clientMetadata: { redirect_uris: [REDIRECT_URI], client_name: 'SDK orchestrator' },
      clientInformation: () => saved.client,
      saveClientInformation: (client) => void (saved.client = client),
      tokens: () => saved.tokens,
      saveTokens: (tokens) => void (saved.tokens = tokens),
      redirectToAuthorization: (url) => void (saved.redirectedTo = url),
      saveCodeVerifier: (verifier) => void (saved.verifier = verifier),
      codeVerifier: () => saved.verifier!,
    };
    expect(await auth(provider, { serverUrl: sandbox.upstreamUrl('airtable') })).toBe('REDIRECT');
    const redirect = await consentTo(saved.redirectedTo!, { login: 'gina' });
    expect(await auth(provider, { serverUrl: sandbox.upstreamUrl('airtable'), authorizationCode: redirect.searchParams.get('code')! })).toBe('AUTHORIZED');
    expect(await identitySeenBy(sandbox, 'airtable', 'list_bases', saved.tokens!.access_token)).toEqual({ login: 'gina' });
  });
});

describe('sandbox OAuth, own_app connector (github, an owner’s app)', () => {
  it('has no dynamic registration', async () => {
    const response = await postJson(`${sandbox.url}/github/oauth/register`, { redirect_uris: [REDIRECT_URI] });
    expect(response.status).toBe(404);
    await expect(registerClient(issuerOf(sandbox, 'github'), { metadata: await metadataOf(sandbox, 'github'), clientMetadata: { redirect_uris: [REDIRECT_URI] } })).rejects.toThrow(
      /does not support dynamic client registration/,
    );
  });

  it('runs registerApp → consent → code → token (client_secret_basic) → MCP → refresh', async () => {
    const app = sandbox.registerApp('github', [REDIRECT_URI], 'Acme Portcullis');
    expect(app).toEqual({ clientId: expect.stringMatching(/^sbc_/), clientSecret: expect.stringMatching(/^sbs_/) });
    const clientInformation = { client_id: app.clientId, client_secret: app.clientSecret };
    const tokens = await authorizeMember(sandbox, 'github', clientInformation, { login: 'alice', name: 'Alice Doe' });
    expect(await identitySeenBy(sandbox, 'github', 'get_me', tokens.access_token)).toEqual({ login: 'alice', name: 'Alice Doe' });

    // The same refresh by hand: Basic credentials, as the SDK sent them above.
    const refreshed = await postForm(`${sandbox.url}/github/oauth/token`, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }, { authorization: basicAuthorization(app.clientId, app.clientSecret) });
    expect(refreshed.status).toBe(200);
    expect(refreshed.headers.get('cache-control')).toBe('no-store');
    const body = (await refreshed.json()) as OAuthTokens;
    expect(await identitySeenBy(sandbox, 'github', 'get_me', body.access_token)).toEqual({ login: 'alice', name: 'Alice Doe' });
  });

  it('creates apps over HTTP too, and accepts client_secret_post', async () => {
    const response = await postJson(`${sandbox.url}/_sandbox/slack/apps`, { redirect_uris: [REDIRECT_URI], name: 'Posted app' });
    expect(response.status).toBe(201);
    const app = (await response.json()) as { client_id: string; client_secret: string };
    expect(app).toEqual({ client_id: expect.stringMatching(/^sbc_/), client_secret: expect.stringMatching(/^sbs_/) });
    const tokens = await authorizeMember(sandbox, 'slack', { client_id: app.client_id, client_secret: app.client_secret, token_endpoint_auth_method: 'client_secret_post' } as OAuthClientInformationMixed, { login: 'bob' });
    expect(await identitySeenBy(sandbox, 'slack', 'slack_read_user_profile', tokens.access_token)).toEqual({ login: 'bob' });
  });
});

describe('sandbox OAuth across restarts', () => {
  it('keeps registered clients and refresh tokens working after a restart with the same secret, and only then', async () => {
    const first = await startSandbox({ secret: SECRET });
    const { port } = new URL(first.url);
    const metadata = await metadataOf(first, 'linear');
    const registered = await registerClient(issuerOf(first, 'linear'), { metadata, clientMetadata: { redirect_uris: [REDIRECT_URI] } });
    const tokens = await authorizeMember(first, 'linear', registered, { login: 'erin' });
    await first.close();
    // fetch keeps connections alive; give it a moment to see that the old server closed them.
    await new Promise((resolve) => setTimeout(resolve, 100));

    const restarted = await startSandbox({ secret: SECRET, port: Number(port) });
    try {
      expect(await identitySeenBy(restarted, 'linear', 'list_teams', tokens.access_token)).toEqual({ login: 'erin' });
      const refreshed = await refreshAuthorization(issuerOf(restarted, 'linear'), { metadata, clientInformation: registered, refreshToken: tokens.refresh_token! });
      expect(await identitySeenBy(restarted, 'linear', 'list_teams', refreshed.access_token)).toEqual({ login: 'erin' });
      // The client itself still verifies: a new authorization goes through.
      const again = await authorizeMember(restarted, 'linear', registered, { login: 'erin' });
      expect(again.access_token).toMatch(/^sbx_/);
    } finally {
      await restarted.close();
    }

    const rekeyed = await startSandbox({ secret: OTHER_SECRET });
    try {
      const refused = await postForm(`${rekeyed.url}/linear/oauth/token`, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token! }, { authorization: basicAuthorization(registered.client_id, registered.client_secret!) });
      expect(refused.status).toBe(401);
      expect(await refused.json()).toMatchObject({ error: 'invalid_client' });
    } finally {
      await rekeyed.close();
    }
  });
});
