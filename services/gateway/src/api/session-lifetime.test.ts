import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate } from 'otplib';
import { createApiHarness } from '../testing/index.ts';

const MINUTE = 60_000;

/** The API harness with a clock the test moves, for session expiry and TOTP steps. */
async function clockedGateway(env: Record<string, string>) {
  const clock = { now: Date.now() };
  const h = await createApiHarness(env, { now: () => clock.now });
  return {
    clock,
    request: h.request,
    signIn: h.signIn,
    advance(ms: number) { clock.now += ms; },
    close: () => h.close(),
  };
}

describe('dashboard session lifetime (injected clock)', () => {
  let g: Awaited<ReturnType<typeof clockedGateway>>;
  beforeAll(async () => { g = await clockedGateway({ SESSION_IDLE_MINUTES: '30', SESSION_MAX_MINUTES: '120' }); });
  afterAll(async () => { await g?.close(); });

  const sessionsStatus = async (cookie: string) => (await g.request({ method: 'GET', url: '/api/users/me/sessions', cookie })).statusCode;

  it('ends a session after SESSION_IDLE_MINUTES without a request; each request restarts the window', async () => {
    const cookie = await g.signIn('idle@example.com');
    g.advance(29 * MINUTE);
    expect(await sessionsStatus(cookie)).toBe(200);
    g.advance(29 * MINUTE); // 58 min after sign-in, 29 since the last request
    expect(await sessionsStatus(cookie)).toBe(200);
    g.advance(30 * MINUTE);
    const res = await g.request({ method: 'GET', url: '/api/users/me/sessions', cookie });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toMatchObject({ error: { code: 'unauthenticated' } });
    expect((await g.request({ method: 'GET', url: '/api/auth/status', cookie })).json()).toMatchObject({ authenticated: false });
  });

  it('ends a session SESSION_MAX_MINUTES after sign-in however active it is', async () => {
    const cookie = await g.signIn('busy@example.com');
    for (let minutes = 20; minutes < 120; minutes += 20) {
      g.advance(20 * MINUTE);
      expect(await sessionsStatus(cookie)).toBe(200);
    }
    g.advance(19 * MINUTE); // 119 min
    expect(await sessionsStatus(cookie)).toBe(200);
    g.advance(1 * MINUTE); // 120 min
    expect(await sessionsStatus(cookie)).toBe(401);
  });

  it('lists only live sessions, with the earlier of the idle and absolute deadlines as expiresAt', async () => {
    const stale = await g.signIn('lister@example.com');
    g.advance(31 * MINUTE);
    const live = await g.signIn('lister@example.com');
    const signedInAt = g.clock.now;
    const res = await g.request({ method: 'GET', url: '/api/users/me/sessions', cookie: live });
    const { sessions } = res.json() as { sessions: Array<{ current: boolean; createdAt: string; lastSeenAt: string; expiresAt: string }> };
    expect(sessions).toHaveLength(1);
    expect(sessions[0]).toMatchObject({
      current: true,
      createdAt: new Date(signedInAt).toISOString(),
      lastSeenAt: new Date(signedInAt).toISOString(),
      expiresAt: new Date(signedInAt + 30 * MINUTE).toISOString(),
    });
    expect(await sessionsStatus(stale)).toBe(401);
  });
});

describe('TOTP time steps (injected clock)', () => {
  let g: Awaited<ReturnType<typeof clockedGateway>>;
  beforeAll(async () => { g = await clockedGateway({}); });
  afterAll(async () => { await g?.close(); });

  it('accepts ±1 step of drift, refuses 2 steps, and never takes a step at or before the last accepted one', async () => {
    // Start at the beginning of a 30 s step so "the step before/after" is exact.
    g.clock.now = Math.floor(Date.now() / 30_000) * 30_000 + 5_000;
    const cookie = await g.signIn('steps@example.com');
    const { secret } = (await g.request({ method: 'POST', url: '/api/auth/mfa/setup', cookie })).json() as { secret: string };
    const at = (stepOffset: number) => generate({ secret, epoch: Math.floor(g.clock.now / 1000) + stepOffset * 30 });
    const verify = async (c: string, code: string) => (await g.request({ method: 'POST', url: '/api/auth/mfa/verify', cookie: c, payload: { code } })).statusCode;

    // Enrol with the previous step's code (drift −1): step T−1 is now spent.
    expect((await g.request({ method: 'POST', url: '/api/auth/mfa/verify-setup', cookie, payload: { code: await at(-1) } })).statusCode).toBe(200);

    // A refused code answers 400 (the session stays signed in, decision 002).
    const s1 = await g.signIn('steps@example.com');
    expect(await verify(s1, await at(-1))).toBe(400); // spent at enrolment
    expect(await verify(s1, await at(2))).toBe(400); // two steps ahead: outside the drift
    expect(await verify(s1, await at(1))).toBe(200); // drift +1: step T+1 is now the last accepted

    const s2 = await g.signIn('steps@example.com');
    expect(await verify(s2, await at(0))).toBe(400); // step T ≤ T+1: refused even though never used
    expect(await verify(s2, await at(1))).toBe(400); // the same code again: replay
    g.advance(60_000); // now step T+2
    expect(await verify(s2, await at(0))).toBe(200);
    expect(await verify(await g.signIn('steps@example.com'), await at(0))).toBe(400);
  });
});
