import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiHarness, HARNESS_ORIGIN, type ApiHarness } from '../testing/index.ts';

const form = (body: Record<string, string>) => ({ 'content-type': 'application/x-www-form-urlencoded', payload: new URLSearchParams(body).toString() });

/** Over real HTTP: the SDK's Express handlers write to the raw response, which `inject()` does not capture. */
async function send(base: string, o: { method?: string; url: string; headers?: Record<string, string>; payload?: string }) {
  const res = await fetch(`${base}${o.url}`, { method: o.method ?? 'GET', redirect: 'manual', ...(o.headers ? { headers: o.headers } : {}), ...(o.payload !== undefined ? { body: o.payload } : {}) });
  const body = await res.text();
  return { statusCode: res.status, headers: Object.fromEntries(res.headers), body, json: () => JSON.parse(body) };
}

describe('the authorization server endpoints (Fastify in front of the MCP SDK handlers, real Postgres)', () => {
  let h: ApiHarness;
  let base: string;
  beforeAll(async () => {
    h = await createApiHarness({ RATE_LIMIT_OAUTH_REGISTER_PER_IP: '3', RATE_LIMIT_OAUTH_TOKEN_PER_IP: '4' });
    base = await h.app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => { await h?.close(); });

  it('publishes RFC 9728 and RFC 8414 metadata naming /mcp, S256 only and public clients', async () => {
    for (const url of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp']) {
      const res = await h.app.inject({ url });
      expect(res.statusCode).toBe(200);
      expect(res.headers['access-control-allow-origin']).toBe('*');
      expect(res.json()).toMatchObject({ resource: `${HARNESS_ORIGIN}/mcp`, authorization_servers: [HARNESS_ORIGIN] });
    }
    const as = (await h.app.inject({ url: '/.well-known/oauth-authorization-server' })).json();
    expect(as).toMatchObject({
      issuer: HARNESS_ORIGIN, authorization_endpoint: `${HARNESS_ORIGIN}/oauth/authorize`, token_endpoint: `${HARNESS_ORIGIN}/oauth/token`,
      registration_endpoint: `${HARNESS_ORIGIN}/oauth/register`, revocation_endpoint: `${HARNESS_ORIGIN}/oauth/revoke`,
      code_challenge_methods_supported: ['S256'], token_endpoint_auth_methods_supported: ['none'],
      authorization_response_iss_parameter_supported: true,
    });
  });

  it('/mcp without a credential names the metadata in WWW-Authenticate (no error code, RFC 6750 §3.1); a made-up token is refused as invalid_token', async () => {
    const metadata = `resource_metadata="${HARNESS_ORIGIN}/.well-known/oauth-protected-resource/mcp"`;
    for (const authorization of [undefined, 'Bearer pco_' + 'x'.repeat(43), 'Bearer pcr_' + 'x'.repeat(43), 'Bearer pcm_' + 'x'.repeat(43)]) {
      const res = await h.app.inject({ method: 'POST', url: '/mcp', headers: { 'content-type': 'application/json', ...(authorization ? { authorization } : {}) }, payload: '{}' });
      expect(res.statusCode).toBe(401);
      expect(res.headers['www-authenticate'], authorization).toBe(authorization
        ? `Bearer realm="portcullis", error="invalid_token", ${metadata}`
        : `Bearer realm="portcullis", ${metadata}`);
    }
  });

  it('bad requests get OAuth errors, never a 500, an HTML page or a stack trace', async () => {
    const cases = [
      { url: '/oauth/token', ...form({ grant_type: 'client_credentials', client_id: 'nope' }), status: 400, error: 'invalid_client' },
      { url: '/oauth/token', 'content-type': 'application/x-www-form-urlencoded', payload: 'x'.repeat(200_000), status: 413, error: 'invalid_request' },
      { url: '/oauth/register', 'content-type': 'application/json', payload: '{"redirect_uris": [', status: 400, error: 'invalid_request' },
      { url: '/oauth/revoke', ...form({ token: 'pco_x' }), status: 400, error: 'invalid_request' },
    ];
    for (const c of cases) {
      const res = await send(base, { method: 'POST', url: c.url, headers: { 'content-type': c['content-type'] }, payload: c.payload });
      expect(res.statusCode, c.url).toBe(c.status);
      expect(res.headers['content-type']).toMatch(/application\/json/);
      expect(res.json().error).toBe(c.error);
      expect(res.body).not.toMatch(/\bat .*\.(js|ts):\d+/);
    }
    const authorize = await send(base, { url: '/oauth/authorize?client_id=not-a-uuid&response_type=code' });
    expect(authorize.statusCode).toBe(400);
    expect(authorize.json()).toMatchObject({ error: 'invalid_client' });
  });

  it('limits registrations (shared, per IP) and token requests (per IP) with 429 too_many_requests and Retry-After', async () => {
    const register = () => send(base, { method: 'POST', url: '/oauth/register', headers: { 'content-type': 'application/json' }, payload: JSON.stringify({ client_name: 'x', redirect_uris: ['http://localhost:1/cb'] }) });
    const registered = [await register(), await register()];
    expect(registered.map((r) => r.statusCode)).toEqual([201, 201]);
    const statuses: number[] = [];
    let refused;
    for (let i = 0; i < 3; i++) {
      refused = await register();
      statuses.push(refused.statusCode);
    }
    expect(statuses).toContain(429);
    expect(refused!.json().error).toBe('too_many_requests');
    expect(Number(refused!.headers['retry-after'])).toBeGreaterThan(0);

    const clientId = registered[0]!.json().client_id as string;
    const token = () => send(base, { method: 'POST', url: '/oauth/token', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: new URLSearchParams({ grant_type: 'refresh_token', client_id: clientId, refresh_token: 'pcr_nope' }).toString() });
    const answers = [];
    for (let i = 0; i < 5; i++) answers.push(await token());
    // The limit counts token and revocation requests together (the earlier test spent some).
    const firstRefusal = answers.findIndex((r) => r.statusCode === 429);
    expect(firstRefusal).toBeGreaterThan(0);
    expect(answers.slice(0, firstRefusal).map((r) => r.json().error)).toEqual(Array(firstRefusal).fill('invalid_grant'));
    expect(answers[4]!.statusCode).toBe(429);
    expect(answers[4]!.json()).toMatchObject({ error: 'too_many_requests' });
  });
});
