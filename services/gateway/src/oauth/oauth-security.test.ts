import { inspect } from 'node:util';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { eq, sql } from 'drizzle-orm';
import { schema, unwrapPrivateKey } from '@portcullis/core';
import { createApiHarness, HARNESS_ORIGIN, type ApiHarness } from '../testing/index.ts';
import { createAgentTokenResolver } from './agent-token-resolver.ts';

/** Over real HTTP: the SDK's Express handlers write to the raw response, which `inject()` does not capture. */
async function send(base: string, o: { method?: string; url: string; headers?: Record<string, string>; payload?: string }) {
  const res = await fetch(`${base}${o.url}`, { method: o.method ?? 'GET', redirect: 'manual', ...(o.headers ? { headers: o.headers } : {}), ...(o.payload !== undefined ? { body: o.payload } : {}) });
  const body = await res.text();
  return { statusCode: res.status, headers: Object.fromEntries(res.headers), body, json: () => JSON.parse(body) };
}

// RFC 7636 appendix B.
const VERIFIER = 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk';
const CHALLENGE = 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM';
const form = (body: Record<string, string>) => ({ method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: new URLSearchParams(body).toString() });

describe('the authorization server against the security BCP (RFC 9700), real Postgres', () => {
  let h: ApiHarness;
  let base: string;
  const register = async (metadata: Record<string, unknown>) => {
    const res = await send(base, { method: 'POST', url: '/oauth/register', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(metadata) });
    expect(res.statusCode, res.body).toBe(201);
    return res.json() as { client_id: string; client_name: string };
  };
  const authorizeUrl = (params: Record<string, string>) => `/oauth/authorize?${new URLSearchParams(params).toString()}`;

  beforeAll(async () => {
    h = await createApiHarness({ RATE_LIMIT_OAUTH_REGISTER_PER_IP: '1000' });
    base = await h.app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => { await h?.close(); });

  it('is no open redirector (RFC 9700 §4.11.2): a bad authorization request of a self-registered https client is answered here, not bounced to its site', async () => {
    const { client_id } = await register({ client_name: 'Anyone', redirect_uris: ['https://phish.example/landing', 'http://127.0.0.1:9/cb'] });
    // Anyone can register a client and then use /oauth/authorize to bounce a browser to any https site.
    const refused: Array<Record<string, string>> = [
      { client_id, redirect_uri: 'https://phish.example/landing', response_type: 'token' },
      { client_id, redirect_uri: 'https://phish.example/landing', response_type: 'code', code_challenge: 'abc', code_challenge_method: 'plain' },
      { client_id, redirect_uri: 'https://phish.example/landing', response_type: 'code', code_challenge: CHALLENGE, code_challenge_method: 'S256', resource: 'https://elsewhere.example/mcp' },
    ];
    for (const params of refused) {
      const res = await send(base, { url: authorizeUrl(params) });
      expect(res.headers.location ?? '', JSON.stringify(params)).not.toMatch(/^https:\/\/phish\.example/);
      expect(res.statusCode).toBe(400);
      expect(res.headers['content-type']).toMatch(/application\/json/);
      expect(res.json().error).toMatch(/^(invalid_request|invalid_target|unsupported_response_type)$/);
    }
    // A native client's loopback redirect still receives the error (it is the member's own machine).
    const loopback = await send(base, { url: authorizeUrl({ client_id, redirect_uri: 'http://127.0.0.1:9/cb', response_type: 'code', code_challenge: 'abc', code_challenge_method: 'plain' }) });
    expect(loopback.statusCode).toBe(302);
    const landing = new URL(loopback.headers.location!);
    expect([landing.origin, landing.searchParams.get('error')]).toEqual(['http://127.0.0.1:9', 'invalid_request']);
    expect(landing.searchParams.get('iss'), 'RFC 9207: the error names its issuer').toBe(HARNESS_ORIGIN);
    // A valid request still goes to the consent page, which shows the host before anything is sent there.
    const valid = await send(base, { url: authorizeUrl({ client_id, redirect_uri: 'https://phish.example/landing', response_type: 'code', code_challenge: CHALLENGE, code_challenge_method: 'S256' }) });
    expect(valid.statusCode).toBe(302);
    expect(valid.headers.location).toMatch(new RegExp(`^${HARNESS_ORIGIN}/oauth/consent\\?request=`));
  });

  it('the client name shown at consent carries no invisible or direction-changing characters (a name cannot reorder the consent text)', async () => {
    // U+202E turns the rest of the consent sentence around; zero-width and line separators hide or break it.
    const registered = await register({ client_name: 'Claude\u200b Desk\u202etop\u2066\u2028x\ufeff', redirect_uris: ['http://127.0.0.1:9/cb'] });
    expect(registered.client_name).toBe('Claude Desk top x');
    expect(registered.client_name).not.toMatch(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u);
    // Cut at 100 characters without splitting a character in two (half a surrogate pair was a 500: Postgres refuses it).
    const long = await register({ client_name: `${'a'.repeat(99)}\u{1f600}b`, redirect_uris: ['http://127.0.0.1:9/cb'] });
    expect(long.client_name).toBe(`${'a'.repeat(99)}\u{1f600}`);
    expect((await register({ client_name: 'Lone \ud800 half', redirect_uris: ['http://127.0.0.1:9/cb'] })).client_name).toBe('Lone half');
  });

  it('registration refuses half a surrogate pair in any stored field as invalid metadata (400), never a 500', async () => {
    for (const metadata of [
      { client_name: 'x', redirect_uris: ['http://127.0.0.1:9/cb'], software_id: 'id-\ud800' },
      { client_name: 'x', redirect_uris: ['http://127.0.0.1:9/cb'], software_version: '\udc00' },
      { client_name: 'x', redirect_uris: ['http://127.0.0.1:9/cb\ud800'] },
      { client_name: 'x', redirect_uris: ['http://127.0.0.1:9/cb'], client_uri: 'https://app.example.com/\udfff' },
    ]) {
      const res = await send(base, { method: 'POST', url: '/oauth/register', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(metadata) });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toMatchObject({ error: 'invalid_client_metadata' });
    }
    // A whole pair is text like any other.
    const res = await send(base, { method: 'POST', url: '/oauth/register', headers: { 'content-type': 'application/json' }, payload: JSON.stringify({ client_name: 'x', redirect_uris: ['http://127.0.0.1:9/cb'], software_id: 'id-\u{1f600}' }) });
    expect(res.statusCode, res.body).toBe(201);
  });

  it('a wrong HTTP method on an OAuth endpoint is answered in the OAuth error format (405), not the dashboard API\'s', async () => {
    for (const [method, url] of [['GET', '/oauth/token'], ['GET', '/oauth/register'], ['PUT', '/oauth/revoke'], ['DELETE', '/oauth/authorize']] as const) {
      const res = await send(base, { method, url });
      expect(res.statusCode, `${method} ${url}`).toBe(405);
      expect(res.json()).toMatchObject({ error: 'method_not_allowed' });
      expect(res.headers.allow).toBeTruthy();
    }
  });

  it('the largest authorization request /oauth/authorize accepts (2,000-character redirect URI, 1,000-character state) can still be consented to', async () => {
    const redirect = `https://app.example.com/${'r'.repeat(2000 - 'https://app.example.com/'.length)}`;
    const { client_id } = await register({ client_name: 'Long', redirect_uris: [redirect] });
    const sent = await send(base, { url: authorizeUrl({ client_id, redirect_uri: redirect, response_type: 'code', code_challenge: CHALLENGE, code_challenge_method: 'S256', state: '"'.repeat(1000) }) });
    expect(sent.statusCode, sent.body).toBe(302);
    const request = new URL(sent.headers.location!).searchParams.get('request')!;
    const cookie = await h.signIn('long-request@example.com');
    const shown = await h.request({ method: 'GET', url: `/api/oauth/consent?request=${encodeURIComponent(request)}`, cookie });
    expect(shown.statusCode, shown.body).toBe(200);
    expect(shown.json().client).toMatchObject({ name: 'Long', redirectHost: 'app.example.com' });
    const denied = await h.request({ method: 'POST', url: '/api/oauth/consent/deny', payload: { request }, cookie });
    expect(denied.statusCode, denied.body).toBe(200);
    expect(new URL(denied.json().redirectTo).searchParams.get('state')).toBe('"'.repeat(1000));
    expect(new URL(denied.json().redirectTo).searchParams.get('iss'), 'RFC 9207: the answer names its issuer').toBe(HARNESS_ORIGIN);
    // Longer than consent could take once signed (every character escaped): refused at authorize, in the OAuth format.
    const tooLarge = await send(base, { url: authorizeUrl({ client_id, redirect_uri: redirect, response_type: 'code', code_challenge: CHALLENGE, code_challenge_method: 'S256', state: '\u0001'.repeat(1000) }) });
    expect(tooLarge.statusCode).toBe(400);
    expect(tooLarge.json()).toMatchObject({ error: 'invalid_request' });
  });

  /** A signed-in owner with an agent and a member key (so a vault), as the dashboard makes them. */
  async function memberWithVault(email: string) {
    const cookie = await h.signIn(email);
    const agentId = (await h.request({ method: 'POST', url: '/api/agents', payload: { name: 'Vault agent' }, cookie })).json().id as string;
    const memberId = (await h.request({ method: 'GET', url: `/api/agents/${agentId}`, cookie })).json().membership.id as string;
    const memberKey = (await h.request({ method: 'PUT', url: `/api/agents/${agentId}/members/${memberId}/key`, payload: {}, cookie })).json().key as string;
    const [member] = await h.db.select().from(schema.members).where(eq(schema.members.id, memberId));
    expect(member!.vaultWrappedPrivateKey).toBeTruthy();
    return { cookie, agentId, memberId, memberKey };
  }

  /** Registers a loopback client and runs authorize → consent; answers the code the browser is sent back with. */
  async function consentedCode(m: Awaited<ReturnType<typeof memberWithVault>>) {
    const { client_id } = await register({ client_name: 'Vault client', redirect_uris: ['http://127.0.0.1:9/cb'] });
    const sent = await send(base, { url: authorizeUrl({ client_id, redirect_uri: 'http://127.0.0.1:9/cb', response_type: 'code', code_challenge: CHALLENGE, code_challenge_method: 'S256' }) });
    const request = new URL(sent.headers.location!).searchParams.get('request')!;
    const consent = await h.request({ method: 'POST', url: '/api/oauth/consent', payload: { request, agentId: m.agentId, memberKey: m.memberKey }, cookie: m.cookie });
    expect(consent.statusCode, consent.body).toBe(200);
    expect(new URL(consent.json().redirectTo).searchParams.get('iss'), 'RFC 9207: the answer names its issuer').toBe(HARNESS_ORIGIN);
    return { client_id, code: new URL(consent.json().redirectTo).searchParams.get('code')! };
  }

  const wrappedKeys = async () => (await h.db.select({ wrapped: schema.mcpOAuthTokens.wrappedVaultKey }).from(schema.mcpOAuthTokens))
    .map((r) => r.wrapped).filter((w): w is string => w !== null);
  const opens = (memberId: string, wrapped: string[], value: string) => wrapped.filter((w) => { try { unwrapPrivateKey(memberId, w, value); return true; } catch { return false; } }).length;

  it('a used code or a rotated refresh token is no wrapping key any more: with a database dump it opens no vault', async () => {
    const m = await memberWithVault('vault-owner@example.com');
    const { memberId } = m;
    const { client_id, code } = await consentedCode(m);
    const exchanged = await send(base, { url: '/oauth/token', ...form({ grant_type: 'authorization_code', client_id, code, code_verifier: VERIFIER }) });
    expect(exchanged.statusCode, exchanged.body).toBe(200);
    const first = exchanged.json() as { refresh_token: string };
    const rotated = await send(base, { url: '/oauth/token', ...form({ grant_type: 'refresh_token', client_id, refresh_token: first.refresh_token }) });
    expect(rotated.statusCode, rotated.body).toBe(200);

    // What leaks later (a code in browser history, an old refresh token in a client's logs) is no credential any more; with a dump it must open nothing either.
    const wrapped = await wrappedKeys();
    expect(wrapped.length).toBeGreaterThan(0);
    for (const spent of [code, first.refresh_token]) {
      for (const w of wrapped) expect(() => unwrapPrivateKey(memberId, w, spent)).toThrow();
    }
    // The live tokens still open it (the member's connections work with them) until the grant is revoked.
    const live = rotated.json() as { access_token: string; refresh_token: string };
    expect(opens(memberId, wrapped, live.refresh_token)).toBe(1);
    expect((await send(base, { url: '/oauth/revoke', ...form({ client_id, token: live.refresh_token }) })).statusCode).toBe(200);
    const afterRevoke = await wrappedKeys();
    for (const revoked of [live.refresh_token, live.access_token]) {
      for (const w of afterRevoke) expect(() => unwrapPrivateKey(memberId, w, revoked)).toThrow();
    }
  });

  it('a code never exchanged, once expired, opens no vault with a dump either (the value sits in browser history)', async () => {
    const m = await memberWithVault('vault-expiry@example.com');
    const { code } = await consentedCode(m);
    const live = await consentedCode(m);
    const issued = await send(base, { url: '/oauth/token', ...form({ grant_type: 'authorization_code', client_id: live.client_id, code: live.code, code_verifier: VERIFIER }) });
    const { access_token } = issued.json() as { access_token: string };
    expect(opens(m.memberId, await wrappedKeys(), code)).toBe(1);

    // Three minutes on (the code lived two), any replica's housekeeping forgets what expired.
    const resolver = createAgentTokenResolver({ db: h.db, bus: h.bus, expirySweepMs: 20, now: () => Date.now() + 3 * 60_000 });
    try {
      for (let i = 0; i < 100 && opens(m.memberId, await wrappedKeys(), code) > 0; i++) await new Promise((r) => setTimeout(r, 20));
    } finally {
      await resolver.close();
    }
    expect(opens(m.memberId, await wrappedKeys(), code)).toBe(0);
    expect(opens(m.memberId, await wrappedKeys(), access_token)).toBe(1); // a live token keeps opening it
  });

  it('registration refuses a control character (NUL and the like) in a redirect URI or a stored field with 400 invalid_redirect_uri / invalid_client_metadata (RFC 7591), never a 500, and stores nothing', async () => {
    const clients = async () => (await h.db.select({ id: schema.mcpOAuthClients.id }).from(schema.mcpOAuthClients)).length;
    const before = await clients();
    for (const uri of ['http://127.0.0.1:9/cb\u0000', 'https://app.example.com/a\u0000b', 'https://app.example.com/\u0007', 'http://127.0.0.1:9/c\u007fb']) {
      const res = await send(base, { method: 'POST', url: '/oauth/register', headers: { 'content-type': 'application/json' }, payload: JSON.stringify({ client_name: 'x', redirect_uris: [uri] }) });
      expect(res.statusCode, `${JSON.stringify(uri)}: ${res.body}`).toBe(400);
      expect(res.json()).toMatchObject({ error: 'invalid_redirect_uri', error_description: expect.stringMatching(/control character/) });
    }
    for (const extra of [{ software_id: 'id\u0000' }, { software_version: '1\u0000' }, { client_uri: 'https://app.example.com/\u0000' }]) {
      const res = await send(base, { method: 'POST', url: '/oauth/register', headers: { 'content-type': 'application/json' }, payload: JSON.stringify({ client_name: 'x', redirect_uris: ['http://127.0.0.1:9/cb'], ...extra }) });
      expect(res.statusCode, `${JSON.stringify(extra)}: ${res.body}`).toBe(400);
      expect(res.json()).toMatchObject({ error: 'invalid_client_metadata' });
    }
    expect(await clients()).toBe(before);
  });

  it('a 500 on an OAuth route (the database refuses) is logged, with the request id, and answered in the OAuth format', async () => {
    const logged = vi.spyOn(h.app.log, 'error');
    await h.db.execute(sql`alter table mcp_oauth_clients rename to mcp_oauth_clients_away`);
    try {
      const res = await send(base, { method: 'POST', url: '/oauth/register', headers: { 'content-type': 'application/json' }, payload: JSON.stringify({ client_name: 'x', redirect_uris: ['http://127.0.0.1:9/cb'] }) });
      expect(res.statusCode).toBe(500);
      expect(res.json()).toMatchObject({ error: 'server_error' });
      const lines = () => logged.mock.calls.map((c) => inspect(c, { depth: 5 }));
      for (let i = 0; i < 50 && !lines().some((l) => l.includes('/oauth/register')); i++) await new Promise((r) => setTimeout(r, 10));
      expect(lines().some((l) => l.includes('/oauth/register') && l.includes('500')), lines().join('\n')).toBe(true);
      expect(lines().some((l) => l.includes('mcp_oauth_clients')), 'the cause is logged too').toBe(true);
    } finally {
      await h.db.execute(sql`alter table mcp_oauth_clients_away rename to mcp_oauth_clients`);
      logged.mockRestore();
    }
  });

  it('one consent per signed request: approving it again, or denying it after, is 409 and mints no second code; a denied request cannot be approved', async () => {
    const m = await memberWithVault('consent-once@example.com');
    const { client_id } = await register({ client_name: 'Once', redirect_uris: ['http://127.0.0.1:9/cb'] });
    const requestOf = async () => {
      const sent = await send(base, { url: authorizeUrl({ client_id, redirect_uri: 'http://127.0.0.1:9/cb', response_type: 'code', code_challenge: CHALLENGE, code_challenge_method: 'S256', state: 's' }) });
      return new URL(sent.headers.location!).searchParams.get('request')!;
    };
    const codes = async () => (await h.db.select({ id: schema.mcpOAuthTokens.id }).from(schema.mcpOAuthTokens).innerJoin(schema.mcpOAuthGrants, eq(schema.mcpOAuthGrants.id, schema.mcpOAuthTokens.grantId))
      .where(eq(schema.mcpOAuthGrants.clientId, client_id))).length;
    const approve = (request: string) => h.request({ method: 'POST', url: '/api/oauth/consent', payload: { request, agentId: m.agentId, memberKey: m.memberKey }, cookie: m.cookie });
    const deny = (request: string) => h.request({ method: 'POST', url: '/api/oauth/consent/deny', payload: { request }, cookie: m.cookie });

    const request = await requestOf();
    // A wrong member key does not spend the request.
    expect((await h.request({ method: 'POST', url: '/api/oauth/consent', payload: { request, agentId: m.agentId, memberKey: `pcm_${'x'.repeat(43)}` }, cookie: m.cookie })).statusCode).toBe(400);
    const first = await approve(request);
    expect(first.statusCode, first.body).toBe(200);
    expect(await codes()).toBe(1);
    const [again, raced, denied] = [await approve(request), await approve(request), await deny(request)];
    for (const res of [again, raced, denied]) {
      expect(res.statusCode, res.body).toBe(409);
      expect(res.json()).toMatchObject({ error: { code: 'conflict', details: { reason: 'request_used' } } });
    }
    expect(await codes()).toBe(1);

    // Denying answers the request too.
    const second = await requestOf();
    expect((await deny(second)).statusCode).toBe(200);
    expect((await approve(second)).statusCode).toBe(409);
    expect((await deny(second)).statusCode).toBe(409);
    expect(await codes()).toBe(1);

    // Concurrent approvals of one request: exactly one code.
    const third = await requestOf();
    const together = await Promise.all([approve(third), approve(third), approve(third)]);
    expect(together.map((r) => r.statusCode).sort()).toEqual([200, 409, 409]);
    expect(await codes()).toBe(2);

    // Rows of requests past their lifetime are cleaned up as consents come in.
    await h.db.insert(schema.mcpOAuthConsentUses).values({ requestDigest: 'expired-test-row', expiresAt: new Date(Date.now() - 60_000) });
    expect((await approve(await requestOf())).statusCode).toBe(200);
    expect(await h.db.select().from(schema.mcpOAuthConsentUses).where(eq(schema.mcpOAuthConsentUses.requestDigest, 'expired-test-row'))).toEqual([]);
  });
});
