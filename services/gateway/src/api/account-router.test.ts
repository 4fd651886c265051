import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiHarness, type ApiHarness } from '../testing/index.ts';

interface SessionItem { id: string; createdAt: string; lastSeenAt: string; expiresAt: string; ip: string | null; userAgent: string | null; current: boolean }

describe('account: my dashboard sessions', () => {
  let h: ApiHarness;
  beforeAll(async () => { h = await createApiHarness(); });
  afterAll(async () => { await h?.close(); });

  const list = async (cookie: string) => {
    const res = await h.request({ method: 'GET', url: '/api/users/me/sessions', cookie });
    expect(res.statusCode).toBe(200);
    return (res.json() as { sessions: SessionItem[] }).sessions;
  };

  it('lists my live sessions with the current one marked, and ends another of them', async () => {
    const laptop = await h.signIn('sam@example.com');
    const phone = await h.signIn('sam@example.com');
    await h.signIn('tess@example.com');

    const sessions = await list(laptop);
    expect(sessions).toHaveLength(2);
    expect(sessions.filter((s) => s.current)).toHaveLength(1);
    for (const s of sessions) {
      expect(s).toEqual({
        id: expect.stringMatching(/^[0-9a-f-]{36}$/), createdAt: expect.any(String), lastSeenAt: expect.any(String), expiresAt: expect.any(String),
        ip: '127.0.0.1', userAgent: 'lightMyRequest', current: expect.any(Boolean),
      });
      expect(Date.parse(s.expiresAt)).toBeGreaterThan(Date.parse(s.createdAt));
    }
    const phoneId = (await list(phone)).find((s) => s.current)!.id;
    expect(sessions.find((s) => !s.current)!.id).toBe(phoneId);

    const ended = await h.request({ method: 'DELETE', url: `/api/users/me/sessions/${phoneId}`, cookie: laptop });
    expect(ended.statusCode).toBe(204);
    expect((await h.request({ method: 'GET', url: '/api/auth/status', cookie: phone })).json()).toMatchObject({ authenticated: false });
    expect((await list(laptop)).map((s) => s.id)).not.toContain(phoneId);
    // Ending it again: it is no longer live.
    expect((await h.request({ method: 'DELETE', url: `/api/users/me/sessions/${phoneId}`, cookie: laptop })).statusCode).toBe(404);
  });

  it('answers 404 for someone else\'s session and for an unknown one, and leaves them alone', async () => {
    const mine = await h.signIn('uma@example.com');
    const theirs = await h.signIn('vic@example.com');
    const theirId = (await list(theirs))[0]!.id;

    for (const id of [theirId, '00000000-0000-4000-8000-000000000000']) {
      const res = await h.request({ method: 'DELETE', url: `/api/users/me/sessions/${id}`, cookie: mine });
      expect(res.statusCode).toBe(404);
      expect(res.json()).toMatchObject({ error: { code: 'not_found' } });
    }
    expect((await h.request({ method: 'GET', url: '/api/auth/status', cookie: theirs })).json()).toMatchObject({ authenticated: true });
    expect((await list(mine)).map((s) => s.id)).not.toContain(theirId);
  });

  it('answers a malformed id with 400 and the field', async () => {
    const cookie = await h.signIn('walt@example.com');
    const res = await h.request({ method: 'DELETE', url: '/api/users/me/sessions/not-a-uuid', cookie });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: { code: 'invalid_request', details: { field: 'id' } } });
  });

  it('ending the current session signs me out and clears the cookie', async () => {
    const cookie = await h.signIn('xena@example.com');
    const id = (await list(cookie))[0]!.id;
    const res = await h.request({ method: 'DELETE', url: `/api/users/me/sessions/${id}`, cookie });
    expect(res.statusCode).toBe(204);
    expect(String(res.headers['set-cookie'])).toMatch(/portcullis_session=;/);
    expect((await h.request({ method: 'GET', url: '/api/users/me/sessions', cookie })).statusCode).toBe(401);
  });

  it('needs a session (401) and our origin for the DELETE (403)', async () => {
    expect((await h.request({ method: 'GET', url: '/api/users/me/sessions' })).statusCode).toBe(401);
    const cookie = await h.signIn('yan@example.com');
    const id = (await list(cookie))[0]!.id;
    const res = await h.request({ method: 'DELETE', url: `/api/users/me/sessions/${id}`, cookie, headers: { origin: 'https://evil.example' } });
    expect(res.statusCode).toBe(403);
    expect(await list(cookie)).toHaveLength(1);
  });
});
