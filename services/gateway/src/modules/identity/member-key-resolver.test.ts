import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eq } from 'drizzle-orm';
import {
  createMemberVault, createMemoryBus, digestKey, displaySuffixOf, generateMemberKey, openDatabase, schema, type DatabaseHandle,
} from '@portcullis/core';
import { createTestDatabase, type TestDatabase } from '@portcullis/core/testing';
import { createMemberKeyResolver } from './member-key-resolver.ts';

describe('member key resolver', () => {
  let testDb: TestDatabase;
  let handle: DatabaseHandle;
  const dir = mkdtempSync(join(tmpdir(), 'pc-resolver-'));
  const key = generateMemberKey();
  let keyId: string;
  let agentId: string;

  beforeAll(async () => {
    testDb = await createTestDatabase('resolver');
    handle = await openDatabase({ DATABASE_URL: testDb.url, DATA_DIR: dir });
    const db = handle.db;
    const [user] = await db.insert(schema.users).values({ email: 'r@example.com' }).returning();
    const [agent] = await db.insert(schema.agents).values({ name: 'R', allowedServices: ['github'] }).returning();
    agentId = agent!.id;
    const [member] = await db.insert(schema.members).values({ agentId, userId: user!.id, email: 'r@example.com', role: 'owner', status: 'approved' }).returning();
    const vault = createMemberVault(member!.id, key);
    await db.update(schema.members).set({ vaultPublicKey: vault.publicKey, vaultWrappedPrivateKey: vault.wrappedPrivateKey }).where(eq(schema.members.id, member!.id));
    const [row] = await db.insert(schema.memberKeys).values({ memberId: member!.id, keyHash: digestKey(key), displaySuffix: displaySuffixOf(key) }).returning();
    keyId = row!.id;
  });
  afterAll(async () => { await handle.close(); await testDb.drop(); rmSync(dir, { recursive: true, force: true }); });

  it('resolves by digest, writes lastUsedAt only in batches, and forgets a revoked key at once', async () => {
    const bus = createMemoryBus();
    const resolver = createMemberKeyResolver({ db: handle.db, bus, lastUsedFlushMs: 3_600_000 });
    const context = await resolver.resolve(key);
    expect(context).toMatchObject({ keyId, agentId, memberStatus: 'approved', allowedServices: ['github'] });
    expect(context!.vaultPrivateKey).toBeDefined();
    for (let i = 0; i < 20; i++) await resolver.resolve(key);

    const lastUsed = async () => (await handle.db.select().from(schema.memberKeys).where(eq(schema.memberKeys.id, keyId)))[0]!.lastUsedAt;
    expect(await lastUsed()).toBeNull(); // 21 calls, no write yet
    await resolver.flushLastUsed();
    expect(await lastUsed()).toBeInstanceOf(Date);

    expect(await resolver.resolve('pcm_' + 'A'.repeat(43))).toBeUndefined();
    expect(await resolver.resolve('not-a-key')).toBeUndefined();

    await handle.db.update(schema.memberKeys).set({ revokedAt: new Date() }).where(eq(schema.memberKeys.id, keyId));
    expect(await resolver.resolve(key)).toBeDefined(); // still cached: no event yet
    bus.publishChange({ kind: 'key.revoked', keyId, agentId });
    await new Promise((r) => setTimeout(r, 5));
    expect(await resolver.resolve(key)).toBeUndefined();
    await resolver.close();
  });
});
