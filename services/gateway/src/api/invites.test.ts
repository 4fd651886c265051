import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eq } from 'drizzle-orm';
import { schema } from '@portcullis/core';
import { createApiHarness, latestMail, readOutbox, type ApiHarness } from '../testing/index.ts';

/**
 * Open invites, resend and revoke, and the notices mailed when someone joins (to the owners)
 * and when they are approved (to the member) — decision 038. Who may call the routes is in
 * members-router.security.test.ts; the limits a resend counts against in abuse-limits.test.ts.
 */

const { invites } = schema;

describe('invites and approvals', () => {
  let h: ApiHarness;
  let owner: string;
  let coOwner: string;

  beforeAll(async () => {
    h = await createApiHarness();
    owner = await h.signIn('inv-owner@example.com');
    coOwner = await h.signIn('inv-coowner@example.com');
  });
  afterAll(async () => { await h?.close(); });

  const api = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, cookie?: string, payload?: Record<string, unknown>) =>
    h.request({ method, url, ...(cookie ? { cookie } : {}), ...(payload !== undefined ? { payload } : {}) });

  async function createAgent(name: string): Promise<string> {
    const res = await api('POST', '/api/agents', owner, { name });
    expect(res.statusCode, res.body).toBe(201);
    return (res.json() as { id: string }).id;
  }
  async function invite(agentId: string, email: string): Promise<{ token: string; url: string; expiresAt: string }> {
    const res = await api('POST', `/api/agents/${agentId}/invite`, owner, { email });
    expect(res.statusCode, res.body).toBe(201);
    return res.json();
  }
  type Listed = { id: string; email: string; invitedBy: string | null; createdAt: string; expiresAt: string };
  async function listed(agentId: string): Promise<Listed[]> {
    const res = await api('GET', `/api/agents/${agentId}/invites`, owner);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    return (res.json() as { invites: Listed[] }).invites;
  }
  const join = (agentId: string, cookie: string, token: string) => api('POST', `/api/agents/${agentId}/join`, cookie, { token });

  it('lists open invites newest first: who, by whom, since and until when — never a token', async () => {
    const agentId = await createAgent('Listing');
    const first = await invite(agentId, 'Ann@Example.com');
    const second = await invite(agentId, 'ben@example.com');
    const used = await invite(agentId, 'cat@example.com');
    expect((await join(agentId, await h.signIn('cat@example.com'), used.token)).statusCode).toBe(200);
    const expiring = await invite(agentId, 'dan@example.com');
    await h.db.update(invites).set({ expiresAt: new Date(Date.now() - 1000) }).where(eq(invites.email, 'dan@example.com'));

    const res = await api('GET', `/api/agents/${agentId}/invites`, owner);
    const body = res.json() as { invites: Listed[] };
    expect(body.invites.map((i) => i.email)).toEqual(['ben@example.com', 'ann@example.com']);
    expect(Object.keys(body.invites[0]!).sort()).toEqual(['createdAt', 'email', 'expiresAt', 'id', 'invitedBy']);
    expect(body.invites[1]).toMatchObject({ invitedBy: 'inv-owner@example.com', expiresAt: first.expiresAt });
    for (const token of [first.token, second.token, used.token, expiring.token]) {
      expect(res.body).not.toContain(token);
      expect(res.body).not.toContain(token.split('.')[1]!); // nor its signature
    }
  });

  it('resends: a fresh link, mailed again; the old link no longer joins, the new one does', async () => {
    const agentId = await createAgent('Resending');
    const old = await invite(agentId, 'eve@example.com');
    const [before] = await listed(agentId);
    const res = await api('POST', `/api/agents/${agentId}/invites/${before!.id}/resend`, owner);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    const resent = res.json() as Listed & { token: string; url: string };
    expect(resent).toMatchObject({ email: 'eve@example.com', invitedBy: 'inv-owner@example.com', url: `http://portcullis.test/join?token=${resent.token}` });
    expect(resent.id).not.toBe(before!.id);
    expect(resent.token).not.toBe(old.token);
    expect(Date.parse(resent.expiresAt)).toBeGreaterThanOrEqual(Date.parse(before!.expiresAt));
    expect(latestMail(h.outboxDir, 'eve@example.com').link).toBe(resent.url);
    expect((await listed(agentId)).map((i) => i.id)).toEqual([resent.id]);

    const eve = await h.signIn('eve@example.com');
    const refused = await join(agentId, eve, old.token);
    expect(refused.statusCode).toBe(400);
    expect(refused.json()).toMatchObject({ error: { code: 'invalid_request', details: { field: 'token', reason: 'invalid_invite' } } });
    expect((refused.json() as { error: { message: string } }).error.message).toMatch(/withdrawn or replaced/);
    expect((await join(agentId, eve, resent.token)).statusCode).toBe(200);
  });

  it('revokes: 204, the link no longer joins, and the invite is gone (404 for a second revoke or a resend)', async () => {
    const agentId = await createAgent('Revoking');
    const { token } = await invite(agentId, 'fay@example.com');
    const [open] = await listed(agentId);
    const mails = readOutbox(h.outboxDir).length;
    expect((await api('DELETE', `/api/agents/${agentId}/invites/${open!.id}`, owner)).statusCode).toBe(204);
    expect(await listed(agentId)).toEqual([]);
    const refused = await join(agentId, await h.signIn('fay@example.com'), token);
    expect(refused.statusCode).toBe(400);
    expect(refused.json()).toMatchObject({ error: { code: 'invalid_request', details: { reason: 'invalid_invite' } } });
    for (const [method, url] of [['DELETE', `/api/agents/${agentId}/invites/${open!.id}`], ['POST', `/api/agents/${agentId}/invites/${open!.id}/resend`]] as const) {
      const again = await api(method, url, owner);
      expect(again.statusCode, `${method} ${url}`).toBe(404);
      expect(again.json()).toMatchObject({ error: { code: 'not_found', message: expect.any(String), requestId: expect.any(String) } });
    }
    expect(readOutbox(h.outboxDir).length).toBe(mails + 1); // only fay's sign-in code
  });

  it('answers 404 for a used invite and for another agent\'s invite, changing nothing; bad ids are 400', async () => {
    const mine = await createAgent('Mine');
    const theirs = await createAgent('Theirs');
    const used = await invite(mine, 'gus@example.com');
    expect((await join(mine, await h.signIn('gus@example.com'), used.token)).statusCode).toBe(200);
    const [usedRow] = await h.db.select().from(invites).where(eq(invites.email, 'gus@example.com'));
    await invite(theirs, 'hal@example.com');
    const [foreign] = await listed(theirs);
    const before = await h.db.select().from(invites).orderBy(invites.id);
    for (const [agentId, inviteId] of [[mine, usedRow!.id], [mine, foreign!.id]]) {
      expect((await api('DELETE', `/api/agents/${agentId}/invites/${inviteId}`, owner)).statusCode).toBe(404);
      expect((await api('POST', `/api/agents/${agentId}/invites/${inviteId}/resend`, owner)).statusCode).toBe(404);
    }
    expect(await h.db.select().from(invites).orderBy(invites.id)).toEqual(before);
    const bad = await api('DELETE', `/api/agents/${mine}/invites/not-a-uuid`, owner);
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({ error: { code: 'invalid_request', details: { field: 'inviteId', in: 'params' } } });
    const body = await api('POST', `/api/agents/${mine}/invites/${foreign!.id}/resend`, owner, { email: 'x@example.com' });
    expect(body.statusCode).toBe(400);
    expect((await api('GET', `/api/agents/${mine}/invites?all=true`, owner)).statusCode).toBe(400);
  });

  it('a resend to an address that joined meanwhile is 409 already_member, and the invite stays', async () => {
    const agentId = await createAgent('Late resend');
    const spare = await invite(agentId, 'ida@example.com');
    const { token } = await invite(agentId, 'ida@example.com');
    expect((await join(agentId, await h.signIn('ida@example.com'), token)).statusCode).toBe(200);
    const [open] = await listed(agentId);
    const res = await api('POST', `/api/agents/${agentId}/invites/${open!.id}/resend`, owner);
    expect(res.statusCode).toBe(409);
    expect(res.json()).toMatchObject({ error: { code: 'conflict', details: { reason: 'already_member' } } });
    expect((await listed(agentId)).map((i) => i.id)).toEqual([open!.id]);
    expect(spare.token).toBeTypeOf('string');
  });

  it('the pending badge dates a request reopened after a rejection by its new join', async () => {
    const agentId = await createAgent('Second try');
    const kim = await h.signIn('kim@example.com');
    const first = await join(agentId, kim, (await invite(agentId, 'kim@example.com')).token);
    const { memberId } = first.json() as { memberId: string };
    expect((await api('POST', `/api/agents/${agentId}/members/${memberId}/reject`, owner)).statusCode).toBe(200);
    await h.db.update(schema.members).set({ createdAt: new Date('2026-01-01T00:00:00Z') }).where(eq(schema.members.id, memberId));
    const before = Date.now();
    expect((await join(agentId, kim, (await invite(agentId, 'kim@example.com')).token)).statusCode).toBe(200);
    const badge = (await api('GET', `/api/dashboard/pending-approvals?agentId=${agentId}`, owner)).json() as { total: number; members: Array<{ memberId: string; requestedAt: string }> };
    expect(badge.total).toBe(1);
    expect(badge.members[0]!.memberId).toBe(memberId);
    expect(Date.parse(badge.members[0]!.requestedAt)).toBeGreaterThanOrEqual(before - 1000);
  });

  it('mails every owner when someone joins, and the member when approved; the agent name quoted, never in a subject', async () => {
    const agentId = await createAgent('Ops https://evil.example');
    // A second owner (made so directly: the API has no "make owner").
    const [co] = await h.db.select().from(schema.users).where(eq(schema.users.email, 'inv-coowner@example.com'));
    await h.db.insert(schema.members).values({ agentId, userId: co!.id, email: 'inv-coowner@example.com', role: 'owner', status: 'approved' });
    expect(coOwner).toBeTypeOf('string');
    const { token } = await invite(agentId, 'joy@example.com');
    const joy = await h.signIn('joy@example.com');
    const joined = await join(agentId, joy, token);
    expect(joined.statusCode).toBe(200);
    const { memberId } = joined.json() as { memberId: string };

    for (const to of ['inv-owner@example.com', 'inv-coowner@example.com']) {
      const mail = latestMail(h.outboxDir, to);
      expect(mail.subject).toBe('joy@example.com asked to join your agent on Portcullis');
      expect(mail.link).toBe(`http://portcullis.test/agents/${agentId}/members`);
      expect(mail.text).toContain('"Ops https[:]//evil[.]example"');
      expect(mail.text).toContain(mail.link);
      expect(mail.text).not.toContain('https://evil.example');
    }
    const pending = await api('GET', '/api/dashboard/pending-approvals', owner);
    expect((pending.json() as { members: Array<{ memberId: string }> }).members.map((m) => m.memberId)).toContain(memberId);

    const mails = readOutbox(h.outboxDir).length;
    expect((await api('PUT', `/api/agents/${agentId}/members/${memberId}/status`, owner, { status: 'approved' })).statusCode).toBe(200);
    const approved = latestMail(h.outboxDir, 'joy@example.com');
    expect(approved.subject).toBe('Your request to join an agent on Portcullis was approved');
    expect(approved.link).toBe(`http://portcullis.test/agents/${agentId}/onboarding`);
    expect(approved.text).toContain('inv-owner@example.com approved');
    expect(approved.text).toContain('"Ops https[:]//evil[.]example"');
    expect(readOutbox(h.outboxDir).length).toBe(mails + 1);
    // Approving again changes nothing and mails nothing.
    expect((await api('PUT', `/api/agents/${agentId}/members/${memberId}/status`, owner, { status: 'approved' })).statusCode).toBe(200);
    expect(readOutbox(h.outboxDir).length).toBe(mails + 1);
    expect(((await api('GET', '/api/dashboard/pending-approvals', owner)).json() as { members: Array<{ memberId: string }> }).members.map((m) => m.memberId)).not.toContain(memberId);
  });
});
