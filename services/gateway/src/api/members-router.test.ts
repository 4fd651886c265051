import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { and, count, eq } from 'drizzle-orm';
import { digestKey, openSealed, schema, sealToMember, unwrapPrivateKey, VaultError } from '@portcullis/core';
import { createApiHarness, latestMail, readOutbox, type ApiHarness } from '../testing/index.ts';

const { connections, invites, memberKeys, members } = schema;
const DAY = 24 * 60 * 60_000;

interface Agent { id: string; ownerMemberId: string }

describe('members, invites and member keys', () => {
  let h: ApiHarness;
  let owner: string;

  beforeAll(async () => {
    h = await createApiHarness({
      // Long enough to outlive an invite, for the expiry test that moves the clock 8 days on.
      SESSION_IDLE_MINUTES: String(30 * 24 * 60), SESSION_MAX_MINUTES: String(30 * 24 * 60),
    });
    owner = await h.signIn('owner@example.com');
  });
  afterAll(async () => { await h.close(); });
  afterEach(() => { vi.useRealTimers(); });

  const api = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, cookie?: string, payload?: unknown) =>
    h.request({ method, url, ...(cookie ? { cookie } : {}), ...(payload !== undefined ? { payload: payload as Record<string, unknown> } : {}) });

  async function createAgent(name = 'Release bot'): Promise<Agent> {
    const res = await api('POST', '/api/agents', owner, { name });
    expect(res.statusCode).toBe(201);
    const body = res.json() as { id: string; membership: { id: string } };
    return { id: body.id, ownerMemberId: body.membership.id };
  }

  async function invite(agent: Agent, email: string): Promise<{ token: string; url: string; expiresAt: string }> {
    const res = await api('POST', `/api/agents/${agent.id}/invite`, owner, { email });
    expect(res.statusCode, res.body).toBe(201);
    return res.json();
  }

  /** Invites `email`, signs them in, joins; optionally approves. Returns their cookie and member id. */
  async function addMember(agent: Agent, email: string, approve = true): Promise<{ cookie: string; memberId: string }> {
    const { token } = await invite(agent, email);
    const cookie = await h.signIn(email);
    const joined = await api('POST', `/api/agents/${agent.id}/join`, cookie, { token });
    expect(joined.statusCode, joined.body).toBe(200);
    const { memberId } = joined.json() as { memberId: string };
    if (approve) expect((await api('PUT', `/api/agents/${agent.id}/members/${memberId}/status`, owner, { status: 'approved' })).statusCode).toBe(200);
    return { cookie, memberId };
  }

  async function issueKey(agent: Agent, member: { cookie: string; memberId: string }, currentKey?: string) {
    const res = await api('PUT', `/api/agents/${agent.id}/members/${member.memberId}/key`, member.cookie, currentKey ? { currentKey } : {});
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as { key: string; keyId: string; displaySuffix: string };
  }

  /** What `/mcp` thinks of a key: 401 when unknown or revoked, else 400 (no initialize sent). */
  const mcpStatus = async (key: string) => (await h.request({
    method: 'POST', url: '/mcp', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, payload: '{}',
  })).statusCode;

  async function stateOf(agentId: string) {
    const memberRows = await h.db.select().from(members).where(eq(members.agentId, agentId)).orderBy(members.id);
    const inviteRows = await h.db.select().from(invites).where(eq(invites.agentId, agentId)).orderBy(invites.id);
    const [keys] = await h.db.select({ n: count() }).from(memberKeys).innerJoin(members, eq(members.id, memberKeys.memberId)).where(eq(members.agentId, agentId));
    return { memberRows, inviteRows, keys: keys!.n };
  }

  const eventsSince = (n: number) => h.events.slice(n);

  it('invites by e-mail: a signed link valid 7 days, mailed to the invitee, recorded as an invite', async () => {
    const agent = await createAgent('Docs agent');
    const before = Date.now();
    const res = await api('POST', `/api/agents/${agent.id}/invite`, owner, { email: '  Bob@Example.com ' });
    expect(res.statusCode).toBe(201);
    const body = res.json() as { token: string; url: string; expiresAt: string };
    expect(body.url).toBe(`http://portcullis.test/join?token=${body.token}`);
    const ttl = Date.parse(body.expiresAt) - before;
    expect(ttl).toBeGreaterThan(7 * DAY - 60_000);
    expect(ttl).toBeLessThanOrEqual(7 * DAY + 60_000);

    const mail = latestMail(h.outboxDir, 'bob@example.com');
    expect(mail.link).toBe(body.url);
    expect(mail.subject).toBe('owner@example.com invited you to an agent on Portcullis');
    expect(mail.text).toContain('"Docs agent"');
    expect(mail.text).toContain(body.url);
    expect(mail.text).toContain('owner@example.com');

    const [row] = await h.db.select().from(invites).where(eq(invites.agentId, agent.id));
    expect(row).toMatchObject({ email: 'bob@example.com', consumedAt: null, memberId: null });
    expect(row!.expiresAt.toISOString()).toBe(body.expiresAt);
  });

  it('joins as the invitee (pending), consumes the invite, and refuses a second use', async () => {
    const agent = await createAgent();
    const { token } = await invite(agent, 'carol@example.com');
    const carol = await h.signIn('carol@example.com');
    const events = h.events.length;

    const joined = await api('POST', `/api/agents/${agent.id}/join`, carol, { token });
    expect(joined.statusCode).toBe(200);
    const { memberId, status } = joined.json() as { memberId: string; status: string };
    expect(status).toBe('pending');
    const [member] = await h.db.select().from(members).where(eq(members.id, memberId));
    expect(member).toMatchObject({ agentId: agent.id, email: 'carol@example.com', role: 'member', status: 'pending', approvedAt: null });
    const [row] = await h.db.select().from(invites).where(eq(invites.agentId, agent.id));
    expect(row!.consumedAt).not.toBeNull();
    expect(row!.memberId).toBe(memberId);

    const again = await api('POST', `/api/agents/${agent.id}/join`, carol, { token });
    expect(again.statusCode).toBe(409);
    expect(again.json()).toMatchObject({ error: { code: 'conflict', details: { reason: 'already_member' } } });

    // Pending: the agent is visible, the member list is not.
    expect((await api('GET', `/api/agents/${agent.id}/members`, carol)).statusCode).toBe(403);
    const list = await api('GET', `/api/agents/${agent.id}/members`, owner);
    expect(list.json()).toMatchObject({ total: 2, members: [{ email: 'owner@example.com', role: 'owner' }, { id: memberId, status: 'pending', key: null }] });
    expect(eventsSince(events)).toEqual([]);
  });

  it('refuses a join from a different signed-in address, changing nothing', async () => {
    const agent = await createAgent();
    const { token } = await invite(agent, 'dave@example.com');
    const mallory = await h.signIn('mallory@example.com');
    const before = await stateOf(agent.id);

    const res = await api('POST', `/api/agents/${agent.id}/join`, mallory, { token });
    expect(res.statusCode).toBe(403);
    expect(res.json()).toMatchObject({ error: { code: 'forbidden', details: { reason: 'email_mismatch' } } });
    expect(await stateOf(agent.id)).toEqual(before);

    // The invite still works for the person it was sent to.
    const dave = await h.signIn('Dave@example.com');
    expect((await api('POST', `/api/agents/${agent.id}/join`, dave, { token })).statusCode).toBe(200);
  });

  it('refuses tampered tokens and tokens for another agent with invalid_invite, changing nothing', async () => {
    const agent = await createAgent();
    const other = await createAgent('Other agent');
    const { token } = await invite(agent, 'erin@example.com');
    const { token: otherToken } = await invite(other, 'erin@example.com');
    const erin = await h.signIn('erin@example.com');
    const before = await stateOf(agent.id);

    const [encoded, signature] = token.split('.') as [string, string];
    const payload = JSON.parse(Buffer.from(encoded, 'base64url').toString('utf8')) as Record<string, unknown>;
    const forge = (change: Record<string, unknown>) => `${Buffer.from(JSON.stringify({ ...payload, ...change })).toString('base64url')}.${signature}`;
    const flipped = signature.slice(0, -2) + (signature.at(-2) === 'A' ? 'B' : 'A') + signature.at(-1);
    const cases = [
      forge({ exp: Number(payload.exp) + 30 * DAY }),
      forge({ email: 'erin@example.com', inviteId: '00000000-0000-4000-8000-000000000000' }),
      `${encoded}.${flipped}`,
      `${encoded}.`,
      'not-a-token',
      otherToken, // genuine, but for another agent
    ];
    for (const bad of cases) {
      const res = await api('POST', `/api/agents/${agent.id}/join`, erin, { token: bad });
      expect(res.statusCode, bad).toBe(400);
      expect(res.json()).toMatchObject({ error: { code: 'invalid_request', details: { reason: 'invalid_invite' } } });
    }
    expect(await stateOf(agent.id)).toEqual(before);
  });

  it('refuses an expired invite with invite_expired, changing nothing', async () => {
    const agent = await createAgent();
    const { token } = await invite(agent, 'frank@example.com');
    const frank = await h.signIn('frank@example.com');
    const before = await stateOf(agent.id);
    // The server's own token, presented 8 days later (only Date moves; timers stay real).
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now() + 8 * DAY);
    const res = await api('POST', `/api/agents/${agent.id}/join`, frank, { token });
    vi.useRealTimers();
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: { code: 'invalid_request', details: { reason: 'invite_expired' } } });
    expect(await stateOf(agent.id)).toEqual(before);
  });

  it('approves a pending member and announces agent.changed; approving again changes nothing', async () => {
    const agent = await createAgent();
    const grace = await addMember(agent, 'grace@example.com', false);
    const events = h.events.length;
    const res = await api('PUT', `/api/agents/${agent.id}/members/${grace.memberId}/status`, owner, { status: 'approved' });
    expect(res.statusCode).toBe(200);
    const member = res.json() as { status: string; approvedAt: string | null; email: string; connections: unknown[]; key: unknown };
    expect(member).toMatchObject({ id: grace.memberId, status: 'approved', email: 'grace@example.com', role: 'member', key: null, connections: [] });
    expect(member.approvedAt).not.toBeNull();
    expect(eventsSince(events)).toEqual([{ kind: 'agent.changed', agentId: agent.id }]);

    const again = await api('PUT', `/api/agents/${agent.id}/members/${grace.memberId}/status`, owner, { status: 'approved' });
    expect(again.statusCode).toBe(200);
    expect(eventsSince(events)).toHaveLength(1);
    // Now approved, grace sees the member list.
    expect((await api('GET', `/api/agents/${agent.id}/members`, grace.cookie)).statusCode).toBe(200);
  });

  it('rejects a pending member: key revoked, the invite and any spare invite dead, only a new invite reopens', async () => {
    const agent = await createAgent();
    const spare = await invite(agent, 'heidi@example.com');
    const heidi = await addMember(agent, 'heidi@example.com', false);
    const { key, keyId } = await issueKey(agent, heidi); // pending members may hold a key (decision 005)
    const usedToken = (await h.db.select().from(invites).where(and(eq(invites.agentId, agent.id), eq(invites.memberId, heidi.memberId))))[0]!;
    expect(usedToken).toBeDefined();
    const events = h.events.length;

    const res = await api('POST', `/api/agents/${agent.id}/members/${heidi.memberId}/reject`, owner);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ id: heidi.memberId, status: 'rejected', approvedAt: null, key: null });
    expect(eventsSince(events)).toEqual([{ kind: 'key.revoked', keyId, agentId: agent.id }, { kind: 'agent.changed', agentId: agent.id }]);
    expect(await mcpStatus(key)).toBe(401);

    // Rejecting again, or approving a rejected member: 409.
    expect((await api('POST', `/api/agents/${agent.id}/members/${heidi.memberId}/reject`, owner)).json())
      .toMatchObject({ error: { code: 'conflict', details: { reason: 'not_pending' } } });
    expect((await api('PUT', `/api/agents/${agent.id}/members/${heidi.memberId}/status`, owner, { status: 'approved' })).statusCode).toBe(409);

    // A rejected member is an outsider again.
    expect((await api('GET', `/api/agents/${agent.id}`, heidi.cookie)).statusCode).toBe(404);
    // Neither the used invite nor the spare one gets her back in.
    const original = readOutbox(h.outboxDir).filter((m) => m.to === 'heidi@example.com' && m.link?.includes('/join?')).at(-1)!;
    const usedAgain = await api('POST', `/api/agents/${agent.id}/join`, heidi.cookie, { token: new URL(original.link!).searchParams.get('token') });
    expect(usedAgain.statusCode).toBe(409);
    expect(usedAgain.json()).toMatchObject({ error: { details: { reason: 'rejected' } } });
    const spareAgain = await api('POST', `/api/agents/${agent.id}/join`, heidi.cookie, { token: spare.token });
    expect(spareAgain.statusCode).toBe(400);
    expect((await h.db.select().from(members).where(eq(members.id, heidi.memberId)))[0]!.status).toBe('rejected');

    // The owner sees the rejected request; a new invite reopens the same membership as pending.
    const list = await api('GET', `/api/agents/${agent.id}/members?status=rejected`, owner);
    expect(list.json()).toMatchObject({ total: 1, members: [{ id: heidi.memberId }] });
    const fresh = await invite(agent, 'heidi@example.com');
    const rejoined = await api('POST', `/api/agents/${agent.id}/join`, heidi.cookie, { token: fresh.token });
    expect(rejoined.statusCode).toBe(200);
    expect(rejoined.json()).toEqual({ memberId: heidi.memberId, status: 'pending' });
  });

  it('removes a member: keys and connections gone, key 401 on /mcp at once, events published', async () => {
    const agent = await createAgent();
    const ivan = await addMember(agent, 'ivan@example.com');
    const { key, keyId } = await issueKey(agent, ivan);
    const [m] = await h.db.select().from(members).where(eq(members.id, ivan.memberId));
    await h.db.insert(connections).values({ memberId: ivan.memberId, service: 'github', identityInfo: { login: 'ivan' }, sealedTokens: sealToMember(m!.vaultPublicKey!, '{"accessToken":"gho_x"}') });
    expect(await mcpStatus(key)).toBe(400); // known key (and now cached)
    const events = h.events.length;

    const res = await api('DELETE', `/api/agents/${agent.id}/members/${ivan.memberId}`, owner);
    expect(res.statusCode).toBe(204);
    expect(eventsSince(events)).toEqual([{ kind: 'key.revoked', keyId, agentId: agent.id }, { kind: 'agent.changed', agentId: agent.id }]);
    expect(await mcpStatus(key)).toBe(401);
    expect(await h.db.select().from(members).where(eq(members.id, ivan.memberId))).toEqual([]);
    expect(await h.db.select().from(memberKeys).where(eq(memberKeys.memberId, ivan.memberId))).toEqual([]);
    expect(await h.db.select().from(connections).where(eq(connections.memberId, ivan.memberId))).toEqual([]);
    expect((await api('GET', `/api/agents/${agent.id}`, ivan.cookie)).statusCode).toBe(404);
    expect((await api('DELETE', `/api/agents/${agent.id}/members/${ivan.memberId}`, owner)).statusCode).toBe(404);
  });

  it('never removes the last owner', async () => {
    const agent = await createAgent();
    const res = await api('DELETE', `/api/agents/${agent.id}/members/${agent.ownerMemberId}`, owner);
    expect(res.statusCode).toBe(409);
    expect(res.json()).toMatchObject({ error: { code: 'conflict', details: { reason: 'last_owner' } } });
    expect((await api('GET', `/api/agents/${agent.id}`, owner)).statusCode).toBe(200);
  });

  it('refuses to invite someone who is already a member', async () => {
    const agent = await createAgent();
    const res = await api('POST', `/api/agents/${agent.id}/invite`, owner, { email: 'OWNER@example.com' });
    expect(res.statusCode).toBe(409);
    expect(res.json()).toMatchObject({ error: { details: { reason: 'already_member' } } });
  });

  it('shows a key exactly once and stores only its digest', async () => {
    const agent = await createAgent();
    const judy = await addMember(agent, 'judy@example.com');
    const res = await api('PUT', `/api/agents/${agent.id}/members/${judy.memberId}/key`, judy.cookie);
    expect(res.statusCode).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    const { key, keyId, displaySuffix } = res.json() as { key: string; keyId: string; displaySuffix: string };
    expect(Object.keys(res.json() as object).sort()).toEqual(['displaySuffix', 'key', 'keyId']);
    expect(key).toMatch(/^pcm_[A-Za-z0-9_-]{43}$/);
    expect(displaySuffix).toBe(key.slice(-4));

    const [row] = await h.db.select().from(memberKeys).where(eq(memberKeys.id, keyId));
    expect(row!.keyHash).toBe(digestKey(key));
    const [member] = await h.db.select().from(members).where(eq(members.id, judy.memberId));
    expect(JSON.stringify([row, member])).not.toContain(key.slice(4));

    for (const cookie of [judy.cookie, owner]) {
      const list = await api('GET', `/api/agents/${agent.id}/members`, cookie);
      expect(list.body).not.toContain(key.slice(4));
      expect(list.body).not.toContain(row!.keyHash);
      expect(list.json()).toMatchObject({ members: [{}, { id: judy.memberId, key: { displaySuffix, lastUsedAt: null } }] });
    }
    expect(await mcpStatus(key)).toBe(400);
  });

  it('rotates with currentKey: old key revoked and announced, the vault re-wrapped, a sealed connection still opens', async () => {
    const agent = await createAgent();
    const kim = await addMember(agent, 'kim@example.com');
    const first = await issueKey(agent, kim);
    const [before] = await h.db.select().from(members).where(eq(members.id, kim.memberId));
    const secretTokens = '{"accessToken":"gho_sealed_for_kim"}';
    await h.db.insert(connections).values({ memberId: kim.memberId, service: 'github', identityInfo: { login: 'kim' }, sealedTokens: sealToMember(before!.vaultPublicKey!, secretTokens) });
    const events = h.events.length;

    const second = await issueKey(agent, kim, first.key);
    expect(second.key).not.toBe(first.key);
    expect(eventsSince(events)).toEqual([{ kind: 'key.revoked', keyId: first.keyId, agentId: agent.id }]);
    const [oldRow] = await h.db.select().from(memberKeys).where(eq(memberKeys.id, first.keyId));
    expect(oldRow!.revokedAt).not.toBeNull();
    expect(await mcpStatus(first.key)).toBe(401);
    expect(await mcpStatus(second.key)).toBe(400);

    const [after] = await h.db.select().from(members).where(eq(members.id, kim.memberId));
    expect(after!.vaultPublicKey).toBe(before!.vaultPublicKey);
    expect(after!.vaultWrappedPrivateKey).not.toBe(before!.vaultWrappedPrivateKey);
    const privateKey = unwrapPrivateKey(kim.memberId, after!.vaultWrappedPrivateKey!, second.key);
    const [conn] = await h.db.select().from(connections).where(eq(connections.memberId, kim.memberId));
    expect(conn!.status).toBe('active');
    expect(openSealed(privateKey, conn!.sealedTokens)).toBe(secretTokens);
    expect(() => unwrapPrivateKey(kim.memberId, after!.vaultWrappedPrivateKey!, first.key)).toThrow(VaultError);

    // Connections are listed as metadata only, to the member and to an owner.
    for (const cookie of [kim.cookie, owner]) {
      const res = await api('GET', `/api/agents/${agent.id}/members/${kim.memberId}/connections`, cookie);
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ connections: [{ service: 'github', identityInfo: { login: 'kim' }, status: 'active', createdAt: conn!.createdAt.toISOString() }] });
      expect(res.body).not.toContain(conn!.sealedTokens.slice(0, 40));
    }
  });

  it('refuses a wrong currentKey with 400 and changes nothing', async () => {
    const agent = await createAgent();
    const leo = await addMember(agent, 'leo@example.com');
    const first = await issueKey(agent, leo);
    const [memberBefore] = await h.db.select().from(members).where(eq(members.id, leo.memberId));
    const keysBefore = await h.db.select().from(memberKeys).where(eq(memberKeys.memberId, leo.memberId));
    const events = h.events.length;

    const wrong = `pcm_${'A'.repeat(43)}`;
    const res = await api('PUT', `/api/agents/${agent.id}/members/${leo.memberId}/key`, leo.cookie, { currentKey: wrong });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: { code: 'invalid_request', details: { field: 'currentKey', reason: 'current_key_mismatch' } } });
    expect(await h.db.select().from(members).where(eq(members.id, leo.memberId))).toEqual([memberBefore]);
    expect(await h.db.select().from(memberKeys).where(eq(memberKeys.memberId, leo.memberId))).toEqual(keysBefore);
    expect(eventsSince(events)).toEqual([]);
    expect(await mcpStatus(first.key)).toBe(400);
  });

  it('rotates without currentKey: a new vault, old connections need re-auth, reset-lost clears them', async () => {
    const agent = await createAgent();
    const mia = await addMember(agent, 'mia@example.com');
    const first = await issueKey(agent, mia);
    const [before] = await h.db.select().from(members).where(eq(members.id, mia.memberId));
    for (const service of ['github', 'linear']) {
      await h.db.insert(connections).values({ memberId: mia.memberId, service, identityInfo: { login: 'mia' }, sealedTokens: sealToMember(before!.vaultPublicKey!, `{"accessToken":"${service}"}`) });
    }
    // Nothing to clear while the key still opens everything.
    expect((await api('POST', `/api/agents/${agent.id}/members/${mia.memberId}/key/reset-lost`, mia.cookie)).json()).toEqual({ cleared: [] });

    const second = await issueKey(agent, mia);
    const [after] = await h.db.select().from(members).where(eq(members.id, mia.memberId));
    expect(after!.vaultPublicKey).not.toBe(before!.vaultPublicKey);
    const privateKey = unwrapPrivateKey(mia.memberId, after!.vaultWrappedPrivateKey!, second.key);
    const conns = await h.db.select().from(connections).where(eq(connections.memberId, mia.memberId));
    expect(conns.map((c) => c.status)).toEqual(['needs_reauth', 'needs_reauth']);
    for (const c of conns) expect(() => openSealed(privateKey, c.sealedTokens)).toThrow(VaultError);
    expect(await mcpStatus(first.key)).toBe(401);

    const members1 = await api('GET', `/api/agents/${agent.id}/members`, owner);
    expect(members1.json()).toMatchObject({ members: [{}, { connections: [{ service: 'github', status: 'needs_reauth' }, { service: 'linear', status: 'needs_reauth' }] }] });

    const events = h.events.length;
    const reset = await api('POST', `/api/agents/${agent.id}/members/${mia.memberId}/key/reset-lost`, mia.cookie);
    expect(reset.statusCode).toBe(200);
    expect(reset.json()).toEqual({ cleared: ['github', 'linear'] });
    expect(eventsSince(events)).toEqual([{ kind: 'agent.changed', agentId: agent.id }]);
    expect(await h.db.select().from(connections).where(eq(connections.memberId, mia.memberId))).toEqual([]);
    expect((await api('POST', `/api/agents/${agent.id}/members/${mia.memberId}/key/reset-lost`, mia.cookie)).json()).toEqual({ cleared: [] });
  });

  it('revokes a key (self or owner), announces it, and a revoked key still re-wraps the vault', async () => {
    const agent = await createAgent();
    const nia = await addMember(agent, 'nia@example.com');
    const first = await issueKey(agent, nia);
    const [before] = await h.db.select().from(members).where(eq(members.id, nia.memberId));
    const events = h.events.length;
    expect((await api('DELETE', `/api/agents/${agent.id}/members/${nia.memberId}/key`, owner)).statusCode).toBe(204);
    expect(eventsSince(events)).toEqual([{ kind: 'key.revoked', keyId: first.keyId, agentId: agent.id }]);
    expect(await mcpStatus(first.key)).toBe(401);
    // Idempotent: nothing left to revoke, nothing announced.
    expect((await api('DELETE', `/api/agents/${agent.id}/members/${nia.memberId}/key`, nia.cookie)).statusCode).toBe(204);
    expect(eventsSince(events)).toHaveLength(1);
    const list = await api('GET', `/api/agents/${agent.id}/members`, nia.cookie);
    expect(list.json()).toMatchObject({ members: [{}, { id: nia.memberId, key: null }] });

    // The holder of the revoked key carries the vault over to a new key.
    const second = await issueKey(agent, nia, first.key);
    const [after] = await h.db.select().from(members).where(eq(members.id, nia.memberId));
    expect(after!.vaultPublicKey).toBe(before!.vaultPublicKey);
    expect(() => unwrapPrivateKey(nia.memberId, after!.vaultWrappedPrivateKey!, second.key)).not.toThrow();
  });

  describe('bad input: 400/413 in the error shape, never 500, nothing changed', () => {
    let agent: Agent;
    let olga: { cookie: string; memberId: string };
    beforeAll(async () => {
      agent = await createAgent('Input agent');
      olga = await addMember(agent, 'olga@example.com');
    });

    const cases: Array<[string, 'GET' | 'POST' | 'PUT' | 'DELETE', (a: Agent, m: string) => string, unknown, number, 'owner' | 'self']> = [
      ['malformed agent id', 'GET', () => '/api/agents/not-a-uuid/members', undefined, 400, 'owner'],
      ['malformed member id', 'PUT', (a) => `/api/agents/${a.id}/members/123/status`, { status: 'approved' }, 400, 'owner'],
      ['injection in member id', 'DELETE', (a) => `/api/agents/${a.id}/members/'%20OR%201=1--`, undefined, 400, 'owner'],
      ['invite: unknown field', 'POST', (a) => `/api/agents/${a.id}/invite`, { email: 'p@example.com', role: 'owner' }, 400, 'owner'],
      ['invite: wrong type', 'POST', (a) => `/api/agents/${a.id}/invite`, { email: ['p@example.com'] }, 400, 'owner'],
      ['invite: not an e-mail', 'POST', (a) => `/api/agents/${a.id}/invite`, { email: 'p' }, 400, 'owner'],
      ['invite: 10k-char e-mail', 'POST', (a) => `/api/agents/${a.id}/invite`, { email: `${'p'.repeat(10_000)}@example.com` }, 400, 'owner'],
      ['invite: oversized body', 'POST', (a) => `/api/agents/${a.id}/invite`, { email: 'p@example.com', pad: 'x'.repeat(100_000) }, 413, 'owner'],
      ['join: missing token', 'POST', (a) => `/api/agents/${a.id}/join`, {}, 400, 'owner'],
      ['join: 10k-char token', 'POST', (a) => `/api/agents/${a.id}/join`, { token: 'x'.repeat(10_000) }, 400, 'owner'],
      ['join: wrong type', 'POST', (a) => `/api/agents/${a.id}/join`, { token: 42 }, 400, 'owner'],
      ['status: not approved', 'PUT', (a, m) => `/api/agents/${a.id}/members/${m}/status`, { status: 'owner' }, 400, 'owner'],
      ['status: unknown field', 'PUT', (a, m) => `/api/agents/${a.id}/members/${m}/status`, { status: 'approved', role: 'owner' }, 400, 'owner'],
      ['reject: unknown field', 'POST', (a, m) => `/api/agents/${a.id}/members/${m}/reject`, { reason: 'x' }, 400, 'owner'],
      ['key: malformed currentKey', 'PUT', (a, m) => `/api/agents/${a.id}/members/${m}/key`, { currentKey: 'pcm_short' }, 400, 'self'],
      ['key: 10k-char currentKey', 'PUT', (a, m) => `/api/agents/${a.id}/members/${m}/key`, { currentKey: 'x'.repeat(10_000) }, 400, 'self'],
      ['key: unknown field', 'PUT', (a, m) => `/api/agents/${a.id}/members/${m}/key`, { key: 'pcm_x' }, 400, 'self'],
      ['key: wrong body type', 'PUT', (a, m) => `/api/agents/${a.id}/members/${m}/key`, ['x'], 400, 'self'],
      ['reset-lost: unknown field', 'POST', (a, m) => `/api/agents/${a.id}/members/${m}/key/reset-lost`, { all: true }, 400, 'self'],
      ['list: bad status filter', 'GET', (a) => `/api/agents/${a.id}/members?status=owner`, undefined, 400, 'owner'],
      ['list: unknown query', 'GET', (a) => `/api/agents/${a.id}/members?admin=1`, undefined, 400, 'owner'],
      ['list: limit below 1', 'GET', (a) => `/api/agents/${a.id}/members?limit=0`, undefined, 400, 'owner'],
      ['list: limit not a number', 'GET', (a) => `/api/agents/${a.id}/members?limit=ten`, undefined, 400, 'owner'],
    ];

    it.each(cases)('%s', async (_name, method, url, payload, status, who) => {
      const before = await stateOf(agent.id);
      const res = await api(method, url(agent, olga.memberId), who === 'owner' ? owner : olga.cookie, payload);
      expect(res.statusCode, res.body).toBe(status);
      const body = res.json() as { error: { code: string; message: string } };
      expect(body.error.code).toBe(status === 413 ? 'payload_too_large' : 'invalid_request');
      expect(body.error.message).not.toMatch(/\n\s+at /);
      expect(await stateOf(agent.id)).toEqual(before);
    });

    it('answers malformed JSON with 400', async () => {
      const res = await h.request({ method: 'POST', url: `/api/agents/${agent.id}/invite`, cookie: owner, payload: '{"email":', headers: { 'content-type': 'application/json' } });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({ error: { code: 'invalid_request' } });
    });
  });
});

describe('key rotation is limited per user and per member (each re-wraps the vault)', () => {
  let h: ApiHarness;
  beforeAll(async () => { h = await createApiHarness({ RATE_LIMIT_KEY_ROTATIONS_PER_MEMBER: '3', RATE_LIMIT_KEY_ROTATIONS_PER_USER: '5' }); });
  afterAll(async () => { await h?.close(); });

  const agentOf = async (cookie: string, name: string) => {
    const res = await h.request({ method: 'POST', url: '/api/agents', payload: { name }, cookie });
    expect(res.statusCode, res.body).toBe(201);
    const body = res.json() as { id: string; membership: { id: string } };
    return { id: body.id, memberId: body.membership.id };
  };
  const rotate = (cookie: string, agent: { id: string; memberId: string }) =>
    h.request({ method: 'PUT', url: `/api/agents/${agent.id}/members/${agent.memberId}/key`, payload: {}, cookie });
  const currentKeys = async (memberId: string) => (await h.db.select().from(memberKeys).where(eq(memberKeys.memberId, memberId))).filter((k) => !k.revokedAt);

  it('answers 429 rate_limited with Retry-After past RATE_LIMIT_KEY_ROTATIONS_PER_MEMBER, then per user across agents; a refused rotation changes nothing', async () => {
    const user = await h.signIn('rotator@example.com');
    const first = await agentOf(user, 'Rotations one');
    const second = await agentOf(user, 'Rotations two');

    // Someone else's refused attempts on this member spend nothing of the member's or the user's allowance.
    const outsider = await h.signIn('rotation-outsider@example.com');
    for (let i = 0; i < 4; i++) expect([403, 404, 429]).toContain((await rotate(outsider, first)).statusCode);

    for (let i = 0; i < 3; i++) expect((await rotate(user, first)).statusCode).toBe(200);
    const before = await currentKeys(first.memberId);
    const refused = await rotate(user, first);
    expect(refused.statusCode).toBe(429);
    expect(refused.json()).toMatchObject({ error: { code: 'rate_limited', details: { retryAfterSeconds: expect.any(Number) } } });
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expect(await currentKeys(first.memberId)).toEqual(before);

    // Per user: two more on another agent reach five in the hour; the sixth is refused there too.
    for (let i = 0; i < 2; i++) expect((await rotate(user, second)).statusCode).toBe(200);
    const perUser = await rotate(user, second);
    expect(perUser.statusCode).toBe(429);
    expect(perUser.json().error.message).toMatch(/by you/);
  });
});
