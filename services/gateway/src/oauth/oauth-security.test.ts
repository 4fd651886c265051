import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiHarness, HARNESS_ORIGIN, type ApiHarness } from '../testing/index.ts';

/** Over real HTTP: the SDK's Express handlers write to the raw response, which `inject()` does not capture. */
async function send(base: string, o: { method?: string; url: string; headers?: Record<string, string>; payload?: string }) {
  const res = await fetch(`${base}${o.url}`, { method: o.method ?? 'GET', redirect: 'manual', ...(o.headers ? { headers: o.headers } : {}), ...(o.payload !== undefined ? { body: o.payload } : {}) });
  const body = await res.text();
  return { statusCode: res.status, headers: Object.fromEntries(res.headers), body, json: () => JSON.parse(body) };
}

const CHALLENGE = 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM';

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
    h = await createApiHarness();
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
    // Longer than consent could take once signed (every character escaped): refused at authorize, in the OAuth format.
    const tooLarge = await send(base, { url: authorizeUrl({ client_id, redirect_uri: redirect, response_type: 'code', code_challenge: CHALLENGE, code_challenge_method: 'S256', state: '\u0001'.repeat(1000) }) });
    expect(tooLarge.statusCode).toBe(400);
    expect(tooLarge.json()).toMatchObject({ error: 'invalid_request' });
  });
});
