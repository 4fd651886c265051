import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eq } from 'drizzle-orm';
import { ApiError, createMemoryBus, openDatabase, schema, type ChangeEvent, type DatabaseHandle } from '@portcullis/core';
import { createTestDatabase, type TestDatabase } from '@portcullis/core/testing';
import type { MailMessage } from '../mail/mailer.ts';
import { INVITE_TTL_MS, signInviteToken } from './invite-tokens.ts';
import { createMemberService, isUniqueViolation } from './member-service.ts';

const { agents, invites, members, users } = schema;
const SECRET = 'member-service-test-secret-0123456789';

describe('member service (real Postgres)', () => {
  let testDb: TestDatabase;
  let handle: DatabaseHandle;
  let dataDir: string;
  const sent: MailMessage[] = [];
  const events: ChangeEvent[] = [];
  let failMail = false;
  const clock = { now: Date.parse('2030-01-01T00:00:00Z') };

  beforeAll(async () => {
    testDb = await createTestDatabase('members');
    dataDir = mkdtempSync(join(tmpdir(), 'pc-members-'));
    handle = await openDatabase({ DATABASE_URL: testDb.url, DATA_DIR: dataDir });
  });
  afterAll(async () => {
    await handle.close();
    await testDb.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const service = () => {
    const bus = createMemoryBus();
    bus.onChange((e) => events.push(e));
    return createMemberService({
      db: handle.db, bus, secret: SECRET, publicUrl: 'https://portcullis.example', now: () => clock.now,
      mailer: { async send(m) { if (failMail) throw new Error('smtp down'); sent.push(m); } },
    });
  };

  async function user(email: string) {
    const [row] = await handle.db.insert(users).values({ email }).returning();
    return { id: row!.id, email };
  }

  async function agentOwnedBy(owner: { id: string; email: string }) {
    const [agent] = await handle.db.insert(agents).values({ name: 'Agent', createdBy: owner.id }).returning();
    await handle.db.insert(members).values({ agentId: agent!.id, userId: owner.id, email: owner.email, role: 'owner', status: 'approved', approvedAt: new Date(clock.now) });
    return agent!.id;
  }

  async function rowsOf(agentId: string) {
    return {
      members: await handle.db.select().from(members).where(eq(members.agentId, agentId)).orderBy(members.id),
      invites: await handle.db.select().from(invites).where(eq(invites.agentId, agentId)).orderBy(invites.id),
    };
  }

  it('refuses a genuinely signed token whose exp has passed with invite_expired, changing nothing', async () => {
    const owner = await user('o1@example.com');
    const bob = await user('bob1@example.com');
    const agentId = await agentOwnedBy(owner);
    const svc = service();
    await svc.invite(agentId, owner, bob.email);
    const [row] = await handle.db.select().from(invites).where(eq(invites.agentId, agentId));
    // Our own token module, the service's secret, an exp in the past.
    const expired = signInviteToken(SECRET, { inviteId: row!.id, agentId, email: bob.email, exp: clock.now - 1 });
    const before = await rowsOf(agentId);
    const err = await svc.join(agentId, bob, expired).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ code: 'invalid_request', details: { reason: 'invite_expired' } });
    expect(await rowsOf(agentId)).toEqual(before);
  });

  it('refuses a token whose exp is valid but whose invite row has expired (the row is authoritative)', async () => {
    const owner = await user('o2@example.com');
    const bob = await user('bob2@example.com');
    const agentId = await agentOwnedBy(owner);
    const svc = service();
    await svc.invite(agentId, owner, bob.email);
    const [row] = await handle.db.select().from(invites).where(eq(invites.agentId, agentId));
    await handle.db.update(invites).set({ expiresAt: new Date(clock.now - 1) }).where(eq(invites.id, row!.id));
    const token = signInviteToken(SECRET, { inviteId: row!.id, agentId, email: bob.email, exp: clock.now + INVITE_TTL_MS });
    await expect(svc.join(agentId, bob, token)).rejects.toMatchObject({ details: { reason: 'invite_expired' } });
  });

  it('refuses a token for an invite that was withdrawn (row gone) as invalid_invite', async () => {
    const owner = await user('o3@example.com');
    const bob = await user('bob3@example.com');
    const agentId = await agentOwnedBy(owner);
    const token = signInviteToken(SECRET, { inviteId: '00000000-0000-4000-8000-000000000000', agentId, email: bob.email, exp: clock.now + 1000 });
    await expect(service().join(agentId, bob, token)).rejects.toMatchObject({ code: 'invalid_request', details: { reason: 'invalid_invite' } });
  });

  it('lets exactly one of two concurrent joins with the same invite through', async () => {
    const owner = await user('o4@example.com');
    const bob = await user('bob4@example.com');
    const agentId = await agentOwnedBy(owner);
    const svc = service();
    const { token } = await svc.invite(agentId, owner, bob.email);
    const results = await Promise.allSettled([svc.join(agentId, bob, token), svc.join(agentId, bob, token)]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    const refused = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
    expect(refused.reason).toMatchObject({ code: 'conflict' });
    expect((await rowsOf(agentId)).members).toHaveLength(2);
  });

  it('withdraws the invite when its e-mail cannot be sent, and says so with 503', async () => {
    const owner = await user('o5@example.com');
    const agentId = await agentOwnedBy(owner);
    failMail = true;
    try {
      await expect(service().invite(agentId, owner, 'bob5@example.com')).rejects.toMatchObject({ code: 'unavailable' });
    } finally {
      failMail = false;
    }
    expect((await rowsOf(agentId)).invites).toEqual([]);
  });

  it('signs links under PUBLIC_URL and mails them to the normalised address', async () => {
    const owner = await user('o6@example.com');
    const agentId = await agentOwnedBy(owner);
    const view = await service().invite(agentId, owner, ' Bob6@Example.COM ');
    expect(view.url).toBe(`https://portcullis.example/join?token=${view.token}`);
    expect(view.expiresAt).toBe(new Date(clock.now + INVITE_TTL_MS).toISOString());
    expect(sent.at(-1)).toMatchObject({ to: 'bob6@example.com', link: view.url });
  });

  it('recognises unique violations through drizzle\'s wrapper', () => {
    expect(isUniqueViolation({ code: '23505' })).toBe(true);
    expect(isUniqueViolation(Object.assign(new Error('wrapped'), { cause: { code: '23505' } }))).toBe(true);
    expect(isUniqueViolation(new Error('other'))).toBe(false);
    expect(isUniqueViolation(undefined)).toBe(false);
  });
});
