import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eq, sql } from 'drizzle-orm';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { auth, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { isolatingFetch, openSealed, schema, unwrapPrivateKey } from '@portcullis/core';
import { apiClient, signInThroughOutbox, type ApiClient } from '../support/api-client.ts';
import { connectMcp } from '../support/mcp-client.ts';
import { ownerAgentWithGithub } from '../support/owner-agent.ts';
import { recoverWithDumpAndSecret } from '../support/vault-attack.ts';
import { startSplitTopology, type SplitTopology } from '../support/split-topology.ts';

const REDIRECT = 'http://127.0.0.1:33418/callback';

/** The MCP SDK's `OAuthClientProvider`, kept in memory as a desktop client would keep it on disk. */
class MemoryProvider implements OAuthClientProvider {
  info: OAuthClientInformationMixed | undefined;
  saved: OAuthTokens | undefined;
  verifier = '';
  authorizationUrl: URL | undefined;
  get redirectUrl() { return REDIRECT; }
  get clientMetadata(): OAuthClientMetadata {
    return { client_name: 'E2E Desktop', redirect_uris: [REDIRECT], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' };
  }
  state() { return 'state-123'; }
  clientInformation() { return this.info; }
  saveClientInformation(info: OAuthClientInformationMixed) { this.info = info; }
  tokens() { return this.saved; }
  saveTokens(tokens: OAuthTokens) { this.saved = tokens; }
  redirectToAuthorization(url: URL) { this.authorizationUrl = url; }
  saveCodeVerifier(v: string) { this.verifier = v; }
  codeVerifier() { return this.verifier; }
}

/** `/mcp` with a bearer token, raw: the HTTP status a client meets. */
async function mcpStatus(gateway: string, token: string): Promise<number> {
  const res = await fetch(`${gateway}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'probe', version: '1' } } }),
  });
  await res.text();
  return res.status;
}

function form(body: Record<string, string>) {
  return { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(body).toString() };
}

/** Polls until every gateway answers `status` for `token`; the time it took, in ms. */
async function untilStatus(gateways: string[], token: string, status: number, budgetMs: number): Promise<number> {
  const started = Date.now();
  for (;;) {
    const statuses = await Promise.all(gateways.map((g) => mcpStatus(g, token)));
    if (statuses.every((s) => s === status)) return Date.now() - started;
    if (Date.now() - started > budgetMs) throw new Error(`after ${budgetMs} ms: ${statuses.join(', ')}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('OAuth sign-in for agent clients: Portcullis as the authorization server of its own /mcp (split processes, two gateways)', () => {
  let t: SplitTopology;
  let owner: ApiClient;
  let agentId: string;
  let ownerMemberId: string;
  let ownerKey: string;
  let g0: string;
  let g1: string;

  /** Registers a client and runs authorize → consent over HTTP; answers the redirect the member's browser is sent to. */
  async function consentFor(o: { api: ApiClient; agentId: string; memberKey: string; challenge?: string; clientId?: string }) {
    const clientId = o.clientId ?? (await (await fetch(`${g0}/oauth/register`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ client_name: 'Raw client', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' }),
    })).json() as { client_id: string }).client_id;
    const authorize = new URL(`${g0}/oauth/authorize`);
    for (const [k, v] of Object.entries({ client_id: clientId, redirect_uri: REDIRECT, response_type: 'code', code_challenge: o.challenge ?? 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM', code_challenge_method: 'S256', state: 's1', resource: `${g0}/mcp` })) authorize.searchParams.set(k, v);
    const sent = await fetch(authorize, { redirect: 'manual' });
    expect(sent.status).toBe(302);
    const request = new URL(sent.headers.get('location')!).searchParams.get('request')!;
    const consent = await o.api.call('POST', '/api/oauth/consent', { request, agentId: o.agentId, memberKey: o.memberKey });
    expect(consent.status, consent.text).toBe(200);
    return { clientId, code: new URL(consent.body.redirectTo).searchParams.get('code')! };
  }

  async function tokensFor(o: { api: ApiClient; agentId: string; memberKey: string }): Promise<{ clientId: string } & OAuthTokens> {
    // RFC 7636 appendix B's verifier and challenge.
    const { clientId, code } = await consentFor(o);
    const res = await fetch(`${g0}/oauth/token`, form({ grant_type: 'authorization_code', client_id: clientId, code, code_verifier: 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk', redirect_uri: REDIRECT }));
    expect(res.status).toBe(200);
    return { clientId, ...(await res.json() as OAuthTokens) };
  }

  beforeAll(async () => {
    t = await startSplitTopology({ gatewayCount: 2 });
    [g0, g1] = t.gateways as [string, string];
    ({ owner, agentId, ownerMemberId, ownerKey } = await ownerAgentWithGithub(t, { email: 'oauth-owner@example.com', agentName: 'OAuth agent' }));
    const policy = await owner.call('POST', `/api/agents/${agentId}/policies`, {
      name: 'No repository search', service: 'github', effect: 'forbid', principal: { type: 'all_members' }, tools: ['search_repositories'], denyMessage: 'Searching is not allowed',
    });
    expect(policy.status, policy.text).toBe(201);
  });
  afterAll(async () => { await t?.stop(); });

  it('the official SDK client goes from a bare 401 to tools: discovery, registration, consent, token, calls allowed and denied, refresh, revocation → 401', async () => {
    const bare = await fetch(`${g0}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: '{}' });
    expect(bare.status).toBe(401);
    expect(bare.headers.get('www-authenticate')).toContain(`resource_metadata="${g0}/.well-known/oauth-protected-resource/mcp"`);

    const provider = new MemoryProvider();
    const first = new Client({ name: 'e2e-oauth', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${g0}/mcp`), { authProvider: provider, fetch: isolatingFetch });
    await expect(first.connect(transport)).rejects.toThrow(/Unauthorized/i);
    // The SDK discovered the metadata, registered itself and sent the member to authorize.
    expect(provider.info?.client_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(provider.authorizationUrl?.origin + provider.authorizationUrl!.pathname).toBe(`${g0}/oauth/authorize`);
    expect(provider.authorizationUrl!.searchParams.get('code_challenge_method')).toBe('S256');
    expect(provider.authorizationUrl!.searchParams.get('resource')).toBe(`${g0}/mcp`);

    // The member's browser: authorize → the dashboard's consent page, which reads and answers the request.
    const sent = await fetch(provider.authorizationUrl!, { redirect: 'manual' });
    expect(sent.status).toBe(302);
    const consentPage = new URL(sent.headers.get('location')!);
    expect(consentPage.pathname).toBe('/oauth/consent');
    const request = consentPage.searchParams.get('request')!;
    expect((await apiClient(g0).call('GET', `/api/oauth/consent?request=${encodeURIComponent(request)}`)).status).toBe(401);
    const shown = await owner.call('GET', `/api/oauth/consent?request=${encodeURIComponent(request)}`);
    expect(shown.status).toBe(200);
    expect(shown.body.client).toMatchObject({ name: 'E2E Desktop', redirectHost: '127.0.0.1:33418' });
    expect(shown.body.agents).toEqual([{ id: agentId, name: 'OAuth agent', hasKey: true }]);
    const wrongKey = await owner.call('POST', '/api/oauth/consent', { request, agentId, memberKey: `pcm_${'A'.repeat(43)}` });
    expect(wrongKey.status).toBe(400);
    const consent = await owner.call('POST', '/api/oauth/consent', { request, agentId, memberKey: ownerKey });
    expect(consent.status).toBe(200);
    const back = new URL(consent.body.redirectTo);
    expect(back.origin + back.pathname).toBe(REDIRECT);
    expect(back.searchParams.get('state')).toBe('state-123');
    await transport.finishAuth(back.searchParams.get('code')!);
    expect(provider.saved?.access_token).toMatch(/^pco_/);
    expect(provider.saved?.refresh_token).toMatch(/^pcr_/);

    const client = new Client({ name: 'e2e-oauth', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${g0}/mcp`), { authProvider: provider, fetch: isolatingFetch }));
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name)).toContain('github__get_me');
    const me = await client.callTool({ name: 'github__get_me', arguments: {} }) as { isError?: boolean; content: Array<{ text: string }> };
    expect(me.isError).toBeFalsy();
    expect(me.content[0]!.text).toContain('olive'); // the member's own GitHub connection, opened with the token
    const denied = await client.callTool({ name: 'github__search_repositories', arguments: { query: 'acme' } }) as { isError?: boolean; content: Array<{ text: string }> };
    expect(denied.isError).toBe(true);
    expect(denied.content[0]!.text).toContain('Searching is not allowed');
    await client.close();

    // The audit names the OAuth client beside the member key record, as it would for the key itself.
    const [grant] = await t.database.db.select().from(schema.mcpOAuthGrants).where(eq(schema.mcpOAuthGrants.clientId, provider.info!.client_id));
    const [ownerKeyRecord] = await t.database.db.select().from(schema.memberKeys).where(eq(schema.memberKeys.id, grant!.keyId));
    expect(ownerKeyRecord!.memberId).toBe(ownerMemberId);
    let audited: Array<{ tool: string; decision: string; oauthClientId?: string; memberKeyId: string }> = [];
    for (let i = 0; i < 100 && audited.length < 2; i++) {
      audited = ((await owner.call('GET', `/api/audit?member=${ownerMemberId}&limit=50`)).body.entries as typeof audited).filter((e) => e.oauthClientId === provider.info!.client_id);
      if (audited.length < 2) await new Promise((r) => setTimeout(r, 100));
    }
    expect(audited.map((e) => [e.tool, e.decision]).sort()).toEqual([['get_me', 'ALLOW'], ['search_repositories', 'DENY']]);
    expect(audited.every((e) => e.memberKeyId === grant!.keyId)).toBe(true);

    // Refresh rotates both tokens; the new access token works on the other replica too.
    const before = provider.saved!;
    provider.saved = { ...before, access_token: 'expired' };
    expect(await auth(provider, { serverUrl: new URL(`${g0}/mcp`), fetchFn: isolatingFetch })).toBe('AUTHORIZED');
    const after = provider.saved!;
    expect(after.refresh_token).not.toBe(before.refresh_token);
    expect(after.access_token).not.toBe(before.access_token);
    expect(await mcpStatus(g1, after.access_token)).toBe(200);

    // Revocation (RFC 7009) ends the grant on every replica.
    const revoked = await fetch(`${g0}/oauth/revoke`, form({ client_id: provider.info!.client_id, token: after.refresh_token! }));
    expect(revoked.status).toBe(200);
    await untilStatus([g0, g1], after.access_token, 401, 1000);
    const refreshAfter = await fetch(`${g0}/oauth/token`, form({ grant_type: 'refresh_token', client_id: provider.info!.client_id, refresh_token: after.refresh_token! }));
    expect(refreshAfter.status).toBe(400);
    expect(await refreshAfter.json()).toMatchObject({ error: 'invalid_grant' });
  });

  it('exchanging a code twice refuses the second and revokes what the first gave', async () => {
    const { clientId, code } = await consentFor({ api: owner, agentId, memberKey: ownerKey });
    const exchange = () => fetch(`${g0}/oauth/token`, form({ grant_type: 'authorization_code', client_id: clientId, code, code_verifier: 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk', redirect_uri: REDIRECT }));
    const first = await exchange();
    expect(first.status).toBe(200);
    const { access_token } = await first.json() as OAuthTokens;
    expect(await mcpStatus(g1, access_token)).toBe(200);
    const again = await exchange();
    expect(again.status).toBe(400);
    expect(await again.json()).toMatchObject({ error: 'invalid_grant' });
    await untilStatus([g0, g1], access_token, 401, 1000);
  });

  it('reusing a rotated refresh token revokes the grant', async () => {
    const issued = await tokensFor({ api: owner, agentId, memberKey: ownerKey });
    const rotated = await fetch(`${g0}/oauth/token`, form({ grant_type: 'refresh_token', client_id: issued.clientId, refresh_token: issued.refresh_token! }));
    expect(rotated.status).toBe(200);
    const fresh = await rotated.json() as OAuthTokens;
    expect(await mcpStatus(g1, fresh.access_token)).toBe(200);
    const reused = await fetch(`${g0}/oauth/token`, form({ grant_type: 'refresh_token', client_id: issued.clientId, refresh_token: issued.refresh_token! }));
    expect(reused.status).toBe(400);
    expect(await reused.json()).toMatchObject({ error: 'invalid_grant' });
    await untilStatus([g0, g1], fresh.access_token, 401, 1000);
  });

  it('PKCE is S256 only: plain is refused at authorize, a missing or wrong verifier at the token endpoint', async () => {
    const { client_id } = await (await fetch(`${g0}/oauth/register`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ client_name: 'PKCE probe', redirect_uris: [REDIRECT] }),
    })).json() as { client_id: string };
    const plain = new URL(`${g0}/oauth/authorize`);
    for (const [k, v] of Object.entries({ client_id, redirect_uri: REDIRECT, response_type: 'code', code_challenge: 'abc', code_challenge_method: 'plain', state: 'p' })) plain.searchParams.set(k, v);
    const refused = await fetch(plain, { redirect: 'manual' });
    expect(refused.status).toBe(302);
    const landing = new URL(refused.headers.get('location')!);
    expect(landing.origin + landing.pathname).toBe(REDIRECT);
    expect(landing.searchParams.get('error')).toBe('invalid_request');
    expect(landing.searchParams.get('error_description')).toContain('code_challenge_method');

    // Deny sends the browser back with access_denied; a forged request is refused before anything.
    const asked = new URL(`${g0}/oauth/authorize`);
    for (const [k, v] of Object.entries({ client_id, redirect_uri: REDIRECT, response_type: 'code', code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM', code_challenge_method: 'S256', state: 'd' })) asked.searchParams.set(k, v);
    const pendingRequest = new URL((await fetch(asked, { redirect: 'manual' })).headers.get('location')!).searchParams.get('request')!;
    const denied = await owner.call('POST', '/api/oauth/consent/deny', { request: pendingRequest });
    expect(denied.status).toBe(200);
    const deniedUrl = new URL(denied.body.redirectTo);
    expect([deniedUrl.searchParams.get('error'), deniedUrl.searchParams.get('state')]).toEqual(['access_denied', 'd']);
    const forged = await owner.call('POST', '/api/oauth/consent', { request: `${pendingRequest.split('.')[0]}.AAAA`, agentId, memberKey: ownerKey });
    expect(forged.status).toBe(400);
    expect(forged.body.error.details).toMatchObject({ reason: 'request_expired' });

    const { code } = await consentFor({ api: owner, agentId, memberKey: ownerKey, clientId: client_id });
    const missing = await fetch(`${g0}/oauth/token`, form({ grant_type: 'authorization_code', client_id, code, redirect_uri: REDIRECT }));
    expect(missing.status).toBe(400);
    expect(await missing.json()).toMatchObject({ error: 'invalid_request' });
    const wrong = await fetch(`${g0}/oauth/token`, form({ grant_type: 'authorization_code', client_id, code, code_verifier: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM', redirect_uri: REDIRECT }));
    expect(wrong.status).toBe(400);
    expect(await wrong.json()).toMatchObject({ error: 'invalid_grant' });
  });

  it('registration refuses redirect URIs other than https and loopback http, in the OAuth error format', async () => {
    for (const uri of ['http://evil.example.com/cb', 'myapp://callback', 'javascript:alert(1)']) {
      const res = await fetch(`${g0}/oauth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ client_name: 'x', redirect_uris: [uri] }) });
      expect(res.status, uri).toBe(400);
      const body = await res.json() as { error: string; error_description: string };
      expect(['invalid_redirect_uri', 'invalid_client_metadata']).toContain(body.error);
      expect(body.error_description).not.toMatch(/at .*\.js/);
    }
    const malformed = await fetch(`${g0}/oauth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{not json' });
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toMatchObject({ error: 'invalid_request' });
    const ok = await fetch(`${g0}/oauth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ client_name: 'ok', redirect_uris: ['https://app.example.com/cb', 'http://localhost:9999/cb'], token_endpoint_auth_method: 'client_secret_post' }) });
    expect(ok.status).toBe(201);
    const registered = await ok.json() as Record<string, unknown>;
    expect(registered.token_endpoint_auth_method).toBe('none');
    expect(registered).not.toHaveProperty('client_secret');
  });

  it('a token for agent A is refused on agent B: consent needs membership of B, a session of B is not found with it, and /api takes no token', async () => {
    const other = apiClient(g0);
    await signInThroughOutbox(other, t.outboxDir, 'oauth-other@example.com');
    const agentB = (await other.call('POST', '/api/agents', { name: 'Agent B' })).body.id as string;
    const otherMemberId = (await other.call('GET', `/api/agents/${agentB}`)).body.membership.id as string;
    const keyB = (await other.call('PUT', `/api/agents/${agentB}/members/${otherMemberId}/key`, {})).body.key as string;

    // The owner of A cannot consent for B, even holding B's key.
    const { client_id } = await (await fetch(`${g0}/oauth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ client_name: 'c', redirect_uris: [REDIRECT] }) })).json() as { client_id: string };
    const authorize = new URL(`${g0}/oauth/authorize`);
    for (const [k, v] of Object.entries({ client_id, redirect_uri: REDIRECT, response_type: 'code', code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM', code_challenge_method: 'S256' })) authorize.searchParams.set(k, v);
    const request = new URL((await fetch(authorize, { redirect: 'manual' })).headers.get('location')!).searchParams.get('request')!;
    expect((await owner.call('POST', '/api/oauth/consent', { request, agentId: agentB, memberKey: keyB })).status).toBe(404);

    const tokenA = (await tokensFor({ api: owner, agentId, memberKey: ownerKey })).access_token;
    const { client: clientB, transport: transportB } = await connectMcp(g0, keyB);
    const sessionB = transportB.sessionId!;
    const withTokenA = await fetch(`${g1}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${tokenA}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': sessionB, 'mcp-protocol-version': '2025-06-18' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
    });
    expect(withTokenA.status).toBe(404);
    await clientB.close();
    const api = await fetch(`${g0}/api/agents/${agentB}`, { headers: { authorization: `Bearer ${tokenA}` } });
    expect(api.status).toBe(401);
    const grantsOfB = await t.database.db.select().from(schema.mcpOAuthGrants).where(eq(schema.mcpOAuthGrants.agentId, agentB));
    expect(grantsOfB).toEqual([]);
  });

  it('a removed member’s tokens stop within 1 s on both replicas; owners and members list and revoke grants', async () => {
    const member = apiClient(g0);
    const email = 'oauth-member@example.com';
    const invite = await owner.call('POST', `/api/agents/${agentId}/invite`, { email });
    await signInThroughOutbox(member, t.outboxDir, email);
    const memberId = (await member.call('POST', `/api/agents/${agentId}/join`, { token: invite.body.token })).body.memberId as string;
    expect((await owner.call('PUT', `/api/agents/${agentId}/members/${memberId}/status`, { status: 'approved' })).status).toBe(200);
    const memberKey = (await member.call('PUT', `/api/agents/${agentId}/members/${memberId}/key`, {})).body.key as string;

    const first = await tokensFor({ api: member, agentId, memberKey });
    const second = await tokensFor({ api: member, agentId, memberKey });
    expect(await mcpStatus(g0, first.access_token)).toBe(200);
    expect(await mcpStatus(g1, first.access_token)).toBe(200);
    expect(await mcpStatus(g1, second.access_token)).toBe(200);

    const ownersView = await owner.call('GET', `/api/agents/${agentId}/oauth-grants`);
    expect(ownersView.status).toBe(200);
    expect(ownersView.body.grants.filter((g: { memberId: string }) => g.memberId === memberId)).toHaveLength(2);
    const membersView = await member.call('GET', `/api/agents/${agentId}/oauth-grants`);
    expect(membersView.body.grants.map((g: { memberId: string }) => g.memberId)).toEqual([memberId, memberId]);
    expect(JSON.stringify(membersView.body)).not.toMatch(/pco_|pcr_|pcc_/);
    const ownersGrant = ownersView.body.grants.find((g: { memberId: string }) => g.memberId === ownerMemberId);
    if (ownersGrant) expect((await member.call('DELETE', `/api/agents/${agentId}/oauth-grants/${ownersGrant.id}`)).status).toBe(404);
    const ownGrant = membersView.body.grants[0].id as string;
    expect((await member.call('DELETE', `/api/agents/${agentId}/oauth-grants/${ownGrant}`)).status).toBe(204);
    expect((await member.call('GET', `/api/agents/${agentId}/oauth-grants`)).body.grants).toHaveLength(1);

    expect((await owner.call('DELETE', `/api/agents/${agentId}/members/${memberId}`)).status).toBe(204);
    const took = await untilStatus([g0, g1], first.access_token, 401, 1000);
    expect(took).toBeLessThanOrEqual(1000);
    await untilStatus([g0, g1], second.access_token, 401, 1000);
  });

  it('a database dump plus the server secret opens no upstream token after OAuth grants', async () => {
    await tokensFor({ api: owner, agentId, memberKey: ownerKey });
    // The upstream token, read the only way the product allows: with the member key.
    const [member] = await t.database.db.select().from(schema.members).where(eq(schema.members.id, ownerMemberId));
    const [connection] = await t.database.db.select().from(schema.connections).where(eq(schema.connections.memberId, ownerMemberId));
    const upstreamToken = JSON.parse(openSealed(unwrapPrivateKey(ownerMemberId, member!.vaultWrappedPrivateKey!, ownerKey), connection!.sealedTokens)).accessToken as string;
    expect(upstreamToken.length).toBeGreaterThan(10);

    const recovered = await recoverWithDumpAndSecret(t.database.db, t.serverSecret);
    // The attacker also tries every wrapped vault key the grants hold, with every string of the dump and the secret.
    const rows = (await t.database.db.execute(sql`select t.wrapped_vault_key, g.member_id from mcp_oauth_tokens t join mcp_oauth_grants g on g.id = t.grant_id where t.wrapped_vault_key is not null`)) as unknown as { rows: Array<{ wrapped_vault_key: string; member_id: string }> };
    expect(rows.rows.length).toBeGreaterThan(0);
    const candidates = [t.serverSecret, ...new Set(recovered)];
    let opened = 0;
    for (const row of rows.rows) {
      for (const candidate of candidates) {
        try {
          const key = unwrapPrivateKey(row.member_id, row.wrapped_vault_key, candidate);
          opened++;
          recovered.push(openSealed(key, connection!.sealedTokens));
        } catch { /* not the wrapping secret */ }
      }
    }
    expect(opened).toBe(0);
    expect(recovered.some((value) => value.includes(upstreamToken))).toBe(false);
    expect(recovered.some((value) => /pco_|pcr_|pcc_/.test(value))).toBe(false);
  });

  it('a disabled agent answers a token as it answers the key (403), and rotating the grant’s key ends the grant, on both replicas within 1 s', async () => {
    const issued = await tokensFor({ api: owner, agentId, memberKey: ownerKey });
    expect(await mcpStatus(g1, issued.access_token)).toBe(200);
    expect((await owner.call('PUT', `/api/agents/${agentId}/status`, { status: 'disabled' })).status).toBe(200);
    await untilStatus([g0, g1], issued.access_token, 403, 1000);
    expect((await owner.call('PUT', `/api/agents/${agentId}/status`, { status: 'active' })).status).toBe(200);
    await untilStatus([g0, g1], issued.access_token, 200, 1000);

    const rotated = await owner.call('PUT', `/api/agents/${agentId}/members/${ownerMemberId}/key`, { currentKey: ownerKey });
    expect(rotated.status).toBe(200);
    await untilStatus([g0, g1], issued.access_token, 401, 1000);
    expect((await owner.call('GET', `/api/agents/${agentId}/oauth-grants`)).body.grants).toEqual([]);
    const refreshed = await fetch(`${g0}/oauth/token`, form({ grant_type: 'refresh_token', client_id: issued.clientId, refresh_token: issued.refresh_token! }));
    expect(refreshed.status).toBe(400);
    expect(await refreshed.json()).toMatchObject({ error: 'invalid_grant' });
  });
});
