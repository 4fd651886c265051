import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eq } from 'drizzle-orm';
import { schema } from '@portcullis/core';
import { createApiHarness, HARNESS_ORIGIN, latestMail, readOutbox, type ApiHarness } from '../testing/index.ts';

type Response = Awaited<ReturnType<ApiHarness['request']>>;

/** Every Set-Cookie line of a response. */
const setCookies = (res: Response): string[] => {
  const header = res.headers['set-cookie'];
  return header === undefined ? [] : Array.isArray(header) ? header : [String(header)];
};
/** The `portcullis_sign_in=…` pair a magic-link answer set (what a browser would send back). */
const signInCookieOf = (res: Response): string => {
  const line = setCookies(res).find((c) => c.startsWith('portcullis_sign_in='));
  if (!line) throw new Error(`no sign-in cookie in ${JSON.stringify(res.headers['set-cookie'])}`);
  return line.split(';')[0]!;
};

describe('auth routes', () => {
  let h: ApiHarness;
  beforeAll(async () => { h = await createApiHarness(); });
  afterAll(async () => { await h.close(); });

  it('signs in with the e-mailed code, reports status, and logs out', async () => {
    const cookie = await h.signIn('Ada@Example.com');
    const status = await h.request({ method: 'GET', url: '/api/auth/status', cookie });
    expect(status.json()).toEqual({ authenticated: true, user: { id: expect.any(String), email: 'ada@example.com' }, mfa: { enabled: false, satisfied: false, required: false } });
    const out = await h.request({ method: 'POST', url: '/api/auth/logout', cookie });
    expect(out.statusCode).toBe(200);
    const after = await h.request({ method: 'GET', url: '/api/auth/status', cookie });
    expect(after.json()).toEqual({ authenticated: false, mfa: { enabled: false, satisfied: false, required: false } });
  });

  it('answers the same for unknown addresses, and the link token works once', async () => {
    const res = await h.request({ method: 'POST', url: '/api/auth/magic-link', payload: { email: 'nobody@example.com' } });
    expect(res.statusCode).toBe(202);
    expect(res.json()).toEqual({ sent: true });
    const browser = signInCookieOf(res);
    const { link } = latestMail(h.outboxDir, 'nobody@example.com');
    const token = new URL(link).searchParams.get('token')!;
    expect((await h.request({ method: 'POST', url: '/api/auth/verify', payload: { token }, cookie: browser })).statusCode).toBe(200);
    expect((await h.request({ method: 'POST', url: '/api/auth/verify', payload: { token }, cookie: browser })).statusCode).toBe(401);
  });

  it('refuses a wrong code, a reused code, and locks a code after repeated wrong guesses', async () => {
    await h.request({ method: 'POST', url: '/api/auth/magic-link', payload: { email: 'bob@example.com' } });
    const { code } = latestMail(h.outboxDir, 'bob@example.com');
    const wrong = code === '00000000' ? '11111111' : '00000000';
    const bad = await h.request({ method: 'POST', url: '/api/auth/verify', payload: { email: 'bob@example.com', code: wrong } });
    expect(bad.statusCode).toBe(401);
    expect(bad.json()).toMatchObject({ error: { code: 'unauthenticated' } });
    expect((await h.request({ method: 'POST', url: '/api/auth/verify', payload: { email: 'bob@example.com', code } })).statusCode).toBe(200);
    expect((await h.request({ method: 'POST', url: '/api/auth/verify', payload: { email: 'bob@example.com', code } })).statusCode).toBe(401);

    await h.request({ method: 'POST', url: '/api/auth/magic-link', payload: { email: 'eve@example.com' } });
    const eve = latestMail(h.outboxDir, 'eve@example.com').code;
    const guess = eve === '00000000' ? '11111111' : '00000000';
    for (let i = 0; i < 5; i++) await h.request({ method: 'POST', url: '/api/auth/verify', payload: { email: 'eve@example.com', code: guess } });
    expect((await h.request({ method: 'POST', url: '/api/auth/verify', payload: { email: 'eve@example.com', code: eve } })).statusCode).toBe(401);
  });

  it.each([
    ['unknown field', { email: 'a@example.com', admin: true }, 400],
    ['wrong type', { email: 42 }, 400],
    ['not an e-mail', { email: 'not-an-email' }, 400],
    ['10k-character string', { email: `${'a'.repeat(10_000)}@example.com` }, 400],
    ['oversized body', { email: 'a@example.com', pad: 'x'.repeat(100_000) }, 413],
  ])('answers bad input (%s) with the error shape, never 500', async (_name, payload, status) => {
    const res = await h.request({ method: 'POST', url: '/api/auth/magic-link', payload });
    expect(res.statusCode).toBe(status);
    const body = res.json() as { error: { code: string; message: string } };
    expect(body.error.code).toBe(status === 413 ? 'payload_too_large' : 'invalid_request');
    expect(body.error.message).not.toMatch(/\n\s+at /);
  });

  it('answers malformed JSON with 400', async () => {
    const res = await h.request({ method: 'POST', url: '/api/auth/magic-link', payload: '{"email":', headers: { 'content-type': 'application/json' } });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: { code: 'invalid_request' } });
  });

  it('refuses a cookie-carrying state change from another origin', async () => {
    const cookie = await h.signIn('carol@example.com');
    const res = await h.request({ method: 'POST', url: '/api/auth/logout', cookie, headers: { origin: 'https://evil.example' } });
    expect(res.statusCode).toBe(403);
    const still = await h.request({ method: 'GET', url: '/api/auth/status', cookie });
    expect(still.json()).toMatchObject({ authenticated: true });
  });

  it('tells automation that writes with the session cookie to send Origin: the OpenAPI description and the 403 say so (issue 30)', async () => {
    const doc = (await h.request({ method: 'GET', url: '/api/openapi.json' })).json() as { info: { description: string } };
    expect(doc.info.description).toContain('`Origin`');
    expect(doc.info.description).toContain('403');
    const cookie = await h.signIn('automation@example.com');
    // A script's POST without Origin or Referer (app.inject itself sends none).
    const res = await h.app.inject({ method: 'POST', url: '/api/auth/logout', headers: { cookie } });
    expect(res.statusCode).toBe(403);
    expect(res.json().error.message).toContain(`Origin: ${HARNESS_ORIGIN}`);
    const withOrigin = await h.app.inject({ method: 'POST', url: '/api/auth/logout', headers: { cookie, origin: HARNESS_ORIGIN } });
    expect(withOrigin.statusCode).toBe(200);
  });

  it('publishes an OpenAPI document generated from the route schemas', async () => {
    const res = await h.request({ method: 'GET', url: '/api/openapi.json' });
    expect(res.statusCode).toBe(200);
    const doc = res.json() as { openapi: string; paths: Record<string, unknown> };
    expect(doc.openapi).toMatch(/^3\./);
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining([
      '/api/auth/magic-link', '/api/auth/verify', '/api/auth/status', '/api/auth/logout',
      '/api/auth/mfa/setup', '/api/auth/mfa/verify-setup', '/api/auth/mfa/verify',
      '/api/users/me/sessions', '/api/users/me/sessions/{id}', '/api/audit', '/api/audit/export', '/api/audit/members', '/api/status',
      '/api/dashboard/stats', '/api/dashboard/member-stats',
      '/api/agents/{id}/sessions', '/api/agents/{id}/my-sessions', '/api/agents/{id}/sessions/{sessionId}/activity', '/api/agents/{id}/sessions/{sessionId}/reset',
      '/api/agents', '/api/agents/{id}', '/api/agents/{id}/status', '/api/agents/{id}/services', '/api/agents/{id}/onboarding',
      '/api/agents/{id}/invite', '/api/agents/{id}/join', '/api/agents/{id}/members', '/api/agents/{id}/members/{memberId}',
      '/api/agents/{id}/members/{memberId}/status', '/api/agents/{id}/members/{memberId}/reject', '/api/agents/{id}/members/{memberId}/key',
      '/api/agents/{id}/members/{memberId}/key/reset-lost', '/api/agents/{id}/members/{memberId}/connections',
      '/api/connectors/meta', '/api/tools/catalog', '/api/agents/{id}/services/credentials', '/api/agents/{id}/services/{service}/credentials',
    ]));
  });
});

describe('sign-in link bound to the browser that asked for it (login CSRF)', () => {
  let h: ApiHarness;
  beforeAll(async () => { h = await createApiHarness(); });
  afterAll(async () => { await h?.close(); });

  const requestLink = async (email: string, cookie?: string) => {
    const res = await h.request({ method: 'POST', url: '/api/auth/magic-link', payload: { email }, ...(cookie ? { cookie } : {}) });
    expect(res.statusCode).toBe(202);
    const token = new URL(latestMail(h.outboxDir, email).link).searchParams.get('token')!;
    return { res, token, browser: signInCookieOf(res) };
  };
  const exchange = (token: string, cookie?: string) =>
    h.request({ method: 'POST', url: '/api/auth/verify', payload: { token }, ...(cookie ? { cookie } : {}) });
  const sessionCount = async (email: string) => (await h.db.select({ id: schema.dashboardSessions.id }).from(schema.dashboardSessions)
    .innerJoin(schema.users, eq(schema.users.id, schema.dashboardSessions.userId)).where(eq(schema.users.email, email))).length;

  it('sets a short-lived HttpOnly, SameSite=Lax nonce cookie scoped to the sign-in routes', async () => {
    const { res } = await requestLink('cookie-shape@example.com');
    const line = setCookies(res).find((c) => c.startsWith('portcullis_sign_in='))!;
    expect(line).toMatch(/^portcullis_sign_in=[A-Za-z0-9_-]{43};/);
    expect(line).toMatch(/; HttpOnly/);
    expect(line).toMatch(/; SameSite=Lax/);
    expect(line).toMatch(/; Path=\/api\/auth/);
    expect(line).toMatch(/; Max-Age=600/);
  });

  it('an attacker\'s link opened in another browser creates no session there; it still works where it was asked for', async () => {
    const attacker = await requestLink('attacker@example.com');
    const victimBrowser = (await requestLink('victim@example.com')).browser; // the victim signed in (or tried) before

    for (const cookie of [undefined, victimBrowser, 'portcullis_sign_in=not-a-nonce']) {
      const res = await exchange(attacker.token, cookie);
      expect(res.statusCode).toBe(403);
      expect(res.json()).toMatchObject({ error: { code: 'forbidden', details: { reason: 'link_other_browser' }, requestId: expect.any(String) } });
      expect(res.json().error.message).toMatch(/code/);
      expect(setCookies(res).some((c) => c.startsWith('portcullis_session='))).toBe(false);
    }
    expect(await sessionCount('attacker@example.com')).toBe(0);

    // In the browser that asked, the link signs in once, and the nonce cookie is cleared.
    const ok = await exchange(attacker.token, attacker.browser);
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toMatchObject({ user: { email: 'attacker@example.com' } });
    expect(setCookies(ok).some((c) => c.startsWith('portcullis_session='))).toBe(true);
    expect(setCookies(ok).find((c) => c.startsWith('portcullis_sign_in='))).toMatch(/Expires=Thu, 01 Jan 1970/);
    expect((await exchange(attacker.token, attacker.browser)).statusCode).toBe(401);
    expect(await sessionCount('attacker@example.com')).toBe(1);
  });

  it('keeps one nonce per browser, so every link that browser asked for works there', async () => {
    const first = await requestLink('twice@example.com');
    const second = await requestLink('twice@example.com', first.browser);
    expect(second.browser).toBe(first.browser);
    expect(second.token).not.toBe(first.token);
    expect((await exchange(first.token, first.browser)).statusCode).toBe(200);
  });

  it('answers a used or unknown link with the same 401, cookie or not', async () => {
    const { token, browser } = await requestLink('dead@example.com');
    expect((await exchange(token, browser)).statusCode).toBe(200);
    expect((await exchange(token)).statusCode).toBe(401);
    expect((await exchange('A'.repeat(43))).statusCode).toBe(401);
  });

  it('lets API automation (no cookie jar) sign in with the typed code', async () => {
    await requestLink('robot@example.com');
    const { code } = latestMail(h.outboxDir, 'robot@example.com');
    const res = await h.request({ method: 'POST', url: '/api/auth/verify', payload: { email: 'robot@example.com', code } });
    expect(res.statusCode).toBe(200);
    expect(setCookies(res).map((c) => c.split('=')[0])).toEqual(['portcullis_session']);
  });
});

describe('sign-in rate limits', () => {
  let h: ApiHarness;
  beforeAll(async () => {
    h = await createApiHarness({
      RATE_LIMIT_MAGIC_LINK_PER_ADDRESS: '2', RATE_LIMIT_MAGIC_LINK_PER_IP: '4', RATE_LIMIT_VERIFY_PER_IP: '3', RATE_LIMIT_MFA_PER_IP: '2',
    });
  });
  afterAll(async () => { await h?.close(); });

  const magicLink = (email: string, remoteAddress: string) =>
    h.request({ method: 'POST', url: '/api/auth/magic-link', payload: { email }, remoteAddress });

  function expectLimited(res: Awaited<ReturnType<ApiHarness['request']>>) {
    expect(res.statusCode).toBe(429);
    expect(res.json()).toMatchObject({ error: { code: 'rate_limited', message: expect.any(String), requestId: expect.any(String) } });
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    expect(Number(res.headers['retry-after'])).toBeLessThanOrEqual(15 * 60);
  }

  it('limits code requests per address, the same way for known and unknown addresses, and sends nothing more', async () => {
    await h.signIn('known@example.com'); // an account exists for this one (one request spent from 10.0.0.9)
    expect((await magicLink('known@example.com', '10.0.0.1')).statusCode).toBe(202);
    expectLimited(await magicLink('known@example.com', '10.0.0.2'));
    for (const ip of ['10.0.0.3', '10.0.0.4']) expect((await magicLink('Unknown@Example.com', ip)).statusCode).toBe(202);
    const unknown = await magicLink('unknown@example.com ', '10.0.0.5');
    expectLimited(unknown);
    const known = await magicLink('known@example.com', '10.0.0.6');
    expect(Object.keys(known.json().error)).toEqual(Object.keys(unknown.json().error));
    expect(known.json().error.message).toBe(unknown.json().error.message);
    expect(readOutbox(h.outboxDir).filter((m) => m.to === 'unknown@example.com')).toHaveLength(2);
  });

  it('limits code requests per IP across addresses', async () => {
    for (let i = 0; i < 4; i++) expect((await magicLink(`ip${i}@example.com`, '10.0.1.1')).statusCode).toBe(202);
    expectLimited(await magicLink('ip9@example.com', '10.0.1.1'));
    expect((await magicLink('ip9@example.com', '10.0.1.2')).statusCode).toBe(202);
  });

  it('limits code and link exchanges per IP, before the code is even looked at', async () => {
    expect((await magicLink('guess@example.com', '10.0.2.9')).statusCode).toBe(202);
    const { code } = latestMail(h.outboxDir, 'guess@example.com');
    const wrong = code === '00000000' ? '11111111' : '00000000';
    for (let i = 0; i < 3; i++) {
      const res = await h.request({ method: 'POST', url: '/api/auth/verify', payload: { email: 'guess@example.com', code: wrong }, remoteAddress: '10.0.2.1' });
      expect(res.statusCode).toBe(401);
    }
    expectLimited(await h.request({ method: 'POST', url: '/api/auth/verify', payload: { email: 'guess@example.com', code }, remoteAddress: '10.0.2.1' }));
    // The right code still works from elsewhere: the limited request changed nothing.
    expect((await h.request({ method: 'POST', url: '/api/auth/verify', payload: { email: 'guess@example.com', code }, remoteAddress: '10.0.2.2' })).statusCode).toBe(200);
  });

  it('limits MFA code checks per IP', async () => {
    const cookie = await h.signIn('mfa-limit@example.com');
    const setup = await h.request({ method: 'POST', url: '/api/auth/mfa/setup', cookie });
    expect(setup.statusCode).toBe(200);
    for (let i = 0; i < 2; i++) {
      const res = await h.request({ method: 'POST', url: '/api/auth/mfa/verify-setup', cookie, payload: { code: '000000' }, remoteAddress: '10.0.3.1' });
      expect(res.statusCode).not.toBe(429);
    }
    expectLimited(await h.request({ method: 'POST', url: '/api/auth/mfa/verify', cookie, payload: { code: '000000' }, remoteAddress: '10.0.3.1' }));
    expect((await h.request({ method: 'POST', url: '/api/auth/mfa/verify', payload: { code: '000000' }, remoteAddress: '10.0.3.1' })).statusCode).toBe(429);
  });
});

describe('the cookie CSRF guard compares Origin with the configured public origin, never with the request\'s own Host', () => {
  let dev: ApiHarness;
  let prod: ApiHarness;
  beforeAll(async () => {
    dev = await createApiHarness();
    prod = await createApiHarness({ NODE_ENV: 'production' });
  });
  afterAll(async () => { await dev?.close(); await prod?.close(); });

  const logout = (h: ApiHarness, cookie: string, headers: Record<string, string>) => h.request({ method: 'POST', url: '/api/auth/logout', cookie, headers });
  const signedIn = async (h: ApiHarness, cookie: string) => (await h.request({ method: 'GET', url: '/api/auth/status', cookie })).json().authenticated as boolean;

  it('refuses Host: evil.example with Origin (or Referer) http://evil.example, in production and outside it, and changes nothing', async () => {
    for (const h of [dev, prod]) {
      const cookie = await h.signIn('csrf-host@example.com');
      for (const headers of [
        { host: 'evil.example', origin: 'http://evil.example' } as Record<string, string>,
        { host: 'evil.example', origin: 'https://evil.example' },
        { host: 'evil.example', origin: '', referer: 'http://evil.example/page' },
      ]) {
        const res = await logout(h, cookie, headers);
        expect(res.statusCode, JSON.stringify(headers)).toBe(403);
        expect(res.json()).toMatchObject({ error: { code: 'forbidden' } });
        expect(await signedIn(h, cookie)).toBe(true);
      }
    }
  });

  it('accepts the public origin (Origin or Referer), whatever Host says', async () => {
    for (const h of [dev, prod]) {
      for (const headers of [{ host: 'gateway.internal:8080', origin: HARNESS_ORIGIN }, { origin: '', referer: `${HARNESS_ORIGIN}/agents` }] as Array<Record<string, string>>) {
        const cookie = await h.signIn('csrf-public@example.com');
        expect((await logout(h, cookie, headers)).statusCode, JSON.stringify(headers)).toBe(200);
        expect(await signedIn(h, cookie)).toBe(false);
      }
    }
  });

  it('outside production, a loopback origin is accepted too (a dashboard dev server); in production it is not', async () => {
    const devCookie = await dev.signIn('csrf-loopback@example.com');
    expect((await logout(dev, devCookie, { host: 'localhost:5173', origin: 'http://localhost:5173' })).statusCode).toBe(200);
    const prodCookie = await prod.signIn('csrf-loopback@example.com');
    for (const origin of ['http://localhost:5173', 'http://127.0.0.1:8080', 'http://[::1]:8080']) {
      expect((await logout(prod, prodCookie, { host: new URL(origin).host, origin })).statusCode, origin).toBe(403);
    }
    expect(await signedIn(prod, prodCookie)).toBe(true);
  });
});

describe('/metrics and /api/openapi.json in production', () => {
  const TOKEN = 'metrics-token-0123456789abcdef0123';
  let prod: ApiHarness;
  let withToken: ApiHarness;
  let dev: ApiHarness;
  beforeAll(async () => {
    prod = await createApiHarness({ NODE_ENV: 'production' });
    withToken = await createApiHarness({ NODE_ENV: 'production', METRICS_TOKEN: TOKEN });
    dev = await createApiHarness();
  });
  afterAll(async () => { await prod?.close(); await withToken?.close(); await dev?.close(); });

  const metrics = (h: ApiHarness, authorization?: string) => h.app.inject({ method: 'GET', url: '/metrics', headers: authorization ? { authorization } : {} });

  it('/metrics is not served in production without METRICS_TOKEN (404, like any unknown path)', async () => {
    const res = await metrics(prod);
    expect(res.statusCode).toBe(404);
    expect(res.body).not.toMatch(/portcullis_|process_/);
    expect((await metrics(prod, `Bearer ${TOKEN}`)).statusCode).toBe(404);
  });

  it('/metrics with METRICS_TOKEN answers only the bearer of that token (401 otherwise, nothing counted shown)', async () => {
    for (const authorization of [undefined, 'Bearer wrong', `Bearer ${TOKEN}x`, `Basic ${Buffer.from(`x:${TOKEN}`).toString('base64')}`, TOKEN]) {
      const res = await metrics(withToken, authorization);
      expect(res.statusCode, String(authorization)).toBe(401);
      expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
      expect(res.body).not.toMatch(/portcullis_|process_/);
    }
    const ok = await metrics(withToken, `Bearer ${TOKEN}`);
    expect(ok.statusCode).toBe(200);
    expect(ok.body).toMatch(/# TYPE /);
  });

  it('/metrics stays anonymous outside production (no token configured)', async () => {
    expect((await metrics(dev)).statusCode).toBe(200);
  });

  it('the OpenAPI document is for signed-in users in production (401 anonymous), public outside it', async () => {
    const anonymous = await prod.request({ method: 'GET', url: '/api/openapi.json' });
    expect(anonymous.statusCode).toBe(401);
    expect(anonymous.json()).toMatchObject({ error: { code: 'unauthenticated' } });
    const cookie = await prod.signIn('openapi-reader@example.com');
    const signed = await prod.request({ method: 'GET', url: '/api/openapi.json', cookie });
    expect(signed.statusCode).toBe(200);
    expect(signed.json().openapi).toMatch(/^3\./);
    expect((await dev.request({ method: 'GET', url: '/api/openapi.json' })).statusCode).toBe(200);
  });
});
