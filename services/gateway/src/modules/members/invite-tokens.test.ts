import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { INVITE_TTL_MS, readInviteToken, signInviteToken, type InvitePayload } from './invite-tokens.ts';

const secret = 'test-secret-0123456789abcdefghijklmnopqrstuvwxyz';
const now = 1_800_000_000_000;
const payload: InvitePayload = {
  inviteId: '0190f7a0-0000-7000-8000-000000000001',
  agentId: '0190f7a0-0000-7000-8000-000000000002',
  email: 'bob@example.com',
  exp: now + INVITE_TTL_MS,
};

function reencode(token: string, change: (p: Record<string, unknown>) => void): string {
  const [encoded, signature] = token.split('.') as [string, string];
  const p = JSON.parse(Buffer.from(encoded, 'base64url').toString('utf8')) as Record<string, unknown>;
  change(p);
  return `${Buffer.from(JSON.stringify(p)).toString('base64url')}.${signature}`;
}

describe('invite tokens', () => {
  it('round-trips a payload signed with the same secret', () => {
    const token = signInviteToken(secret, payload);
    expect(token).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
    expect(readInviteToken(secret, token, now)).toEqual({ ok: true, payload });
  });

  it('is valid 7 days and expired after', () => {
    const token = signInviteToken(secret, payload);
    expect(readInviteToken(secret, token, payload.exp - 1).ok).toBe(true);
    expect(readInviteToken(secret, token, payload.exp)).toEqual({ ok: false, problem: 'invite_expired' });
  });

  it.each([
    ['another agent id', (p: Record<string, unknown>) => { p.agentId = '0190f7a0-0000-7000-8000-000000000099'; }],
    ['another e-mail', (p: Record<string, unknown>) => { p.email = 'eve@example.com'; }],
    ['a later expiry', (p: Record<string, unknown>) => { p.exp = (p.exp as number) + INVITE_TTL_MS; }],
  ])('refuses a payload edited to carry %s', (_name, change) => {
    const token = reencode(signInviteToken(secret, payload), change);
    expect(readInviteToken(secret, token, now)).toEqual({ ok: false, problem: 'invalid_invite' });
  });

  it('refuses a token signed with another secret, or with the bare secret and no domain label', () => {
    expect(readInviteToken(secret, signInviteToken('another-secret', payload), now).ok).toBe(false);
    const encoded = signInviteToken(secret, payload).split('.')[0]!;
    const unlabelled = createHmac('sha256', secret).update(encoded).digest('base64url');
    expect(readInviteToken(secret, `${encoded}.${unlabelled}`, now)).toEqual({ ok: false, problem: 'invalid_invite' });
  });

  it('never believes an expired-looking payload without a valid signature', () => {
    const forged = reencode(signInviteToken(secret, payload), (p) => { p.exp = 1; });
    expect(readInviteToken(secret, forged, now)).toEqual({ ok: false, problem: 'invalid_invite' });
  });

  it.each([
    '', '.', 'abc', 'a.b.c', `${'a'.repeat(10)}.${'b'.repeat(42)}`, `!!!.${'b'.repeat(43)}`,
    `${Buffer.from('not json').toString('base64url')}.${'A'.repeat(43)}`,
  ])('refuses malformed token %j', (token) => {
    expect(readInviteToken(secret, token, now)).toEqual({ ok: false, problem: 'invalid_invite' });
  });

  it('refuses a correctly signed payload of the wrong shape', () => {
    const encoded = Buffer.from(JSON.stringify({ ...payload, admin: true })).toString('base64url');
    const key = createHmac('sha256', secret).update('portcullis/invite-token/v1').digest();
    const signature = createHmac('sha256', key).update(encoded).digest('base64url');
    expect(readInviteToken(secret, `${encoded}.${signature}`, now)).toEqual({ ok: false, problem: 'invalid_invite' });
  });
});
