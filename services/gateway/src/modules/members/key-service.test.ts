import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { and, eq, isNull } from 'drizzle-orm';
import {
  createMemoryBus, createMemberVault, openDatabase, openSealed, schema, sealToMember, unwrapPrivateKey,
  type ChangeEvent, type DatabaseHandle,
} from '@portcullis/core';
import { createTestDatabase, type TestDatabase } from '@portcullis/core/testing';
import { createKeyService } from './key-service.ts';

const { agents, connections, memberKeys, members, users } = schema;

describe('key service: keys and the sealed vault (real Postgres)', () => {
  let testDb: TestDatabase;
  let handle: DatabaseHandle;
  let dataDir: string;
  const events: ChangeEvent[] = [];
  let keys: ReturnType<typeof createKeyService>;

  beforeAll(async () => {
    testDb = await createTestDatabase('keys');
    dataDir = mkdtempSync(join(tmpdir(), 'pc-keys-'));
    handle = await openDatabase({ DATABASE_URL: testDb.url, DATA_DIR: dataDir });
    const bus = createMemoryBus();
    bus.onChange((e) => events.push(e));
    keys = createKeyService({ db: handle.db, bus });
  });
  afterAll(async () => {
    await handle.close();
    await testDb.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  let n = 0;
  async function member(status: 'pending' | 'approved' = 'approved') {
    n += 1;
    const [u] = await handle.db.insert(users).values({ email: `m${n}@example.com` }).returning();
    const [agent] = await handle.db.insert(agents).values({ name: `Agent ${n}` }).returning();
    const [m] = await handle.db.insert(members).values({ agentId: agent!.id, userId: u!.id, email: u!.email, status }).returning();
    return { agentId: agent!.id, memberId: m!.id, user: { id: u!.id, email: u!.email } };
  }
  const row = async (memberId: string) => (await handle.db.select().from(members).where(eq(members.id, memberId)))[0]!;
  const activeKeys = (memberId: string) => handle.db.select().from(memberKeys).where(and(eq(memberKeys.memberId, memberId), isNull(memberKeys.revokedAt)));

  it('creates a vault with the first key, re-wraps with currentKey, replaces without it', async () => {
    const m = await member();
    const first = await keys.issue(m.agentId, m.user, m.memberId, undefined);
    expect(first.vault).toBe('created');
    const pub = (await row(m.memberId)).vaultPublicKey!;
    await handle.db.insert(connections).values({ memberId: m.memberId, service: 'slack', sealedTokens: sealToMember(pub, 'tok') });

    const second = await keys.issue(m.agentId, m.user, m.memberId, first.key);
    expect(second.vault).toBe('rewrapped');
    const afterRewrap = await row(m.memberId);
    expect(afterRewrap.vaultPublicKey).toBe(pub);
    const [conn] = await handle.db.select().from(connections).where(eq(connections.memberId, m.memberId));
    expect(openSealed(unwrapPrivateKey(m.memberId, afterRewrap.vaultWrappedPrivateKey!, second.key), conn!.sealedTokens)).toBe('tok');

    const third = await keys.issue(m.agentId, m.user, m.memberId, undefined);
    expect(third.vault).toBe('replaced');
    expect((await row(m.memberId)).vaultPublicKey).not.toBe(pub);
    expect((await handle.db.select().from(connections).where(eq(connections.memberId, m.memberId)))[0]!.status).toBe('needs_reauth');
    expect((await activeKeys(m.memberId)).map((k) => k.id)).toEqual([third.keyId]);
  });

  it('starts a new vault when the right key cannot open the stored one (already unreadable)', async () => {
    const m = await member();
    const first = await keys.issue(m.agentId, m.user, m.memberId, undefined);
    // A vault wrapped under some other key, as if written by a bug or an older scheme.
    const stray = createMemberVault(m.memberId, `pcm_${'Z'.repeat(43)}`);
    await handle.db.update(members).set({ vaultPublicKey: stray.publicKey, vaultWrappedPrivateKey: stray.wrappedPrivateKey }).where(eq(members.id, m.memberId));
    const second = await keys.issue(m.agentId, m.user, m.memberId, first.key);
    expect(second.vault).toBe('replaced');
    const after = await row(m.memberId);
    expect(() => unwrapPrivateKey(m.memberId, after.vaultWrappedPrivateKey!, second.key)).not.toThrow();
  });

  it('refuses an older (not newest) key as currentKey', async () => {
    const m = await member();
    const first = await keys.issue(m.agentId, m.user, m.memberId, undefined);
    await keys.issue(m.agentId, m.user, m.memberId, first.key);
    await expect(keys.issue(m.agentId, m.user, m.memberId, first.key)).rejects.toMatchObject({ code: 'invalid_request', details: { reason: 'current_key_mismatch' } });
  });

  it('serialises concurrent issues: one active key afterwards, and the vault opens with it', async () => {
    const m = await member();
    const issued = await Promise.all([0, 1, 2, 3].map(() => keys.issue(m.agentId, m.user, m.memberId, undefined)));
    const active = await activeKeys(m.memberId);
    expect(active).toHaveLength(1);
    const survivor = issued.find((k) => k.keyId === active[0]!.id)!;
    const after = await row(m.memberId);
    expect(() => unwrapPrivateKey(m.memberId, after.vaultWrappedPrivateKey!, survivor.key)).not.toThrow();
    // Every key but the survivor was announced as revoked.
    const revokedIds = events.filter((e) => e.kind === 'key.revoked' && e.agentId === m.agentId).map((e) => (e as { keyId: string }).keyId);
    expect(revokedIds.sort()).toEqual(issued.map((k) => k.keyId).filter((id) => id !== survivor.keyId).sort());
  });

  it('lets a pending member hold a key', async () => {
    const m = await member('pending');
    const issued = await keys.issue(m.agentId, m.user, m.memberId, undefined);
    expect(issued.key).toMatch(/^pcm_/);
  });

  it('reset-lost clears only what cannot be opened, or everything when there is no vault', async () => {
    const m = await member();
    await keys.issue(m.agentId, m.user, m.memberId, undefined);
    const pub = (await row(m.memberId)).vaultPublicKey!;
    await handle.db.insert(connections).values([
      { memberId: m.memberId, service: 'github', sealedTokens: sealToMember(pub, 'a') },
      { memberId: m.memberId, service: 'notion', sealedTokens: sealToMember(pub, 'b'), status: 'needs_reauth' },
    ]);
    expect(await keys.resetLost(m.agentId, m.user, m.memberId)).toEqual({ cleared: ['notion'] });

    const bare = await member();
    await handle.db.insert(connections).values({ memberId: bare.memberId, service: 'jira', sealedTokens: 'orphan' });
    expect(await keys.resetLost(bare.agentId, bare.user, bare.memberId)).toEqual({ cleared: ['jira'] });
  });
});
