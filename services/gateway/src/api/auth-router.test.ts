import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiHarness, latestMail, type ApiHarness } from '../testing/index.ts';

describe('auth routes', () => {
  let h: ApiHarness;
  beforeAll(async () => { h = await createApiHarness(); });
  afterAll(async () => { await h.close(); });

  it('signs in with the e-mailed code, reports status, and logs out', async () => {
    const cookie = await h.signIn('Ada@Example.com');
    const status = await h.request({ method: 'GET', url: '/api/auth/status', cookie });
    expect(status.json()).toMatchObject({ authenticated: true, user: { email: 'ada@example.com' } });
    const out = await h.request({ method: 'POST', url: '/api/auth/logout', cookie });
    expect(out.statusCode).toBe(200);
    const after = await h.request({ method: 'GET', url: '/api/auth/status', cookie });
    expect(after.json()).toMatchObject({ authenticated: false });
  });

  it('answers the same for unknown addresses, and the link token works once', async () => {
    const res = await h.request({ method: 'POST', url: '/api/auth/magic-link', payload: { email: 'nobody@example.com' } });
    expect(res.statusCode).toBe(202);
    expect(res.json()).toEqual({ sent: true });
    const { link } = latestMail(h.outboxDir, 'nobody@example.com');
    const token = new URL(link).searchParams.get('token')!;
    expect((await h.request({ method: 'POST', url: '/api/auth/verify', payload: { token } })).statusCode).toBe(200);
    expect((await h.request({ method: 'POST', url: '/api/auth/verify', payload: { token } })).statusCode).toBe(401);
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

  it('publishes an OpenAPI document generated from the route schemas', async () => {
    const res = await h.request({ method: 'GET', url: '/api/openapi.json' });
    expect(res.statusCode).toBe(200);
    const doc = res.json() as { openapi: string; paths: Record<string, unknown> };
    expect(doc.openapi).toMatch(/^3\./);
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(['/api/auth/magic-link', '/api/auth/verify', '/api/audit']));
  });
});
