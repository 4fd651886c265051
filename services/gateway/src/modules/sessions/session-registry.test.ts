import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eq } from 'drizzle-orm';
import { createMemoryBus, openDatabase, schema, type Bus, type ChangeEvent, type DatabaseHandle } from '@portcullis/core';
import { createTestDatabase, type TestDatabase } from '@portcullis/core/testing';
import { announceEndedSessions, createSessionRegistry, endSessionsOfKeys, type SessionRegistry } from './session-registry.ts';

const IDLE_MS = 60 * 60_000;
/** Change events reach listeners asynchronously (a microtask in-process, a message on NATS). */
const delivered = () => new Promise((resolve) => setImmediate(resolve));

describe('session registry (real Postgres, injected clock)', () => {
  let testDb: TestDatabase;
  let handle: DatabaseHandle;
  let dataDir: string;
  let registry: SessionRegistry;
  const events: ChangeEvent[] = [];
  const bus: Bus = createMemoryBus();
  bus.onChange((e) => events.push(e));
  const clock = { now: Date.parse('2030-01-01T00:00:00Z') };
  let ids: { agentId: string; memberId: string; keyId: string };

  beforeAll(async () => {
    testDb = await createTestDatabase('sessions');
    dataDir = mkdtempSync(join(tmpdir(), 'pc-sessions-'));
    handle = await openDatabase({ DATABASE_URL: testDb.url, DATA_DIR: dataDir });
    const db = handle.db;
    const [user] = await db.insert(schema.users).values({ email: 'ses@example.com' }).returning();
    const [agent] = await db.insert(schema.agents).values({ name: 'Sessions' }).returning();
    const [member] = await db.insert(schema.members).values({ agentId: agent!.id, userId: user!.id, email: 'ses@example.com', role: 'owner', status: 'approved' }).returning();
    const [key] = await db.insert(schema.memberKeys).values({ memberId: member!.id, keyHash: 'h', displaySuffix: 'abcd' }).returning();
    ids = { agentId: agent!.id, memberId: member!.id, keyId: key!.id };
    registry = createSessionRegistry({ db, bus, idleMs: IDLE_MS, flushMs: 60_000, cacheTtlMs: 10_000, now: () => clock.now });
  });
  afterAll(async () => {
    await registry?.close();
    await handle?.close();
    await testDb?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const open = async () => {
    const id = randomUUID();
    await registry.open({ id, ...ids, clientName: 'c', clientVersion: '1', protocolVersion: '2025-06-18' });
    return id;
  };

  it('a session used within the idle window stays live; past it, it expires, ends and announces it', async () => {
    const id = await open();
    clock.now += IDLE_MS - 1_000;
    registry.touch(id);
    clock.now += IDLE_MS - 1_000;
    expect(await registry.findLive(id)).toMatchObject({ id, status: 'active' });
    expect((await registry.get(ids.agentId, id))!.status).toBe('active');

    clock.now += IDLE_MS + 1;
    expect((await registry.get(ids.agentId, id))!.status).toBe('expired');
    expect(await registry.findLive(id)).toBeUndefined();
    expect(await registry.get(ids.agentId, id)).toMatchObject({ status: 'terminated', endReason: 'expired' });
    expect(events).toContainEqual({ kind: 'session.ended', sessionId: id, agentId: ids.agentId });
  });

  it('ends a session once: a second end and an unknown id change nothing', async () => {
    const id = await open();
    events.length = 0;
    expect(await registry.end(id, 'client')).toBe(true);
    expect(await registry.end(id, 'reset')).toBe(false);
    expect(await registry.end(randomUUID(), 'reset')).toBe(false);
    expect(events).toHaveLength(1);
    expect(await registry.get(ids.agentId, id)).toMatchObject({ status: 'terminated', endReason: 'client' });
  });

  it('lists by status and member, newest first, with the total; another agent sees none of them', async () => {
    clock.now += 1_000;
    const a = await open();
    clock.now += 1_000;
    const b = await open();
    const active = await registry.list(ids.agentId, { status: 'active', limit: 10, offset: 0 });
    expect(active.sessions.map((s) => s.id)).toEqual([b, a]);
    expect(active.total).toBe(2);
    const page = await registry.list(ids.agentId, { memberId: ids.memberId, limit: 1, offset: 1 });
    expect(page.sessions).toHaveLength(1);
    expect(page.total).toBe(4);
    expect((await registry.list(randomUUID(), { limit: 10, offset: 0 })).total).toBe(0);
    expect(await registry.get(randomUUID(), a)).toBeUndefined();
  });

  it('ends the live sessions of given keys only (with the reason), and announces exactly those', async () => {
    const [other] = await handle.db.insert(schema.memberKeys).values({ memberId: ids.memberId, keyHash: 'h2', displaySuffix: 'efgh' }).returning();
    const live = await open();
    const alreadyEnded = await open();
    await registry.end(alreadyEnded, 'client');
    const otherKey = randomUUID();
    await registry.open({ id: otherKey, ...ids, keyId: other!.id, clientName: 'c', clientVersion: '1', protocolVersion: '2025-06-18' });
    events.length = 0;

    const ended = await handle.db.transaction((tx) => endSessionsOfKeys(tx, [ids.keyId], 'key_revoked', new Date(clock.now)));
    expect(ended.map((e) => e.sessionId)).toContain(live);
    expect(ended.map((e) => e.sessionId)).not.toContain(alreadyEnded);
    expect(ended.map((e) => e.sessionId)).not.toContain(otherKey);
    announceEndedSessions(bus, ended);
    await delivered();
    expect(await registry.findLive(live)).toBeUndefined();
    expect(await registry.get(ids.agentId, live)).toMatchObject({ status: 'terminated', endReason: 'key_revoked', endedAt: new Date(clock.now).toISOString() });
    expect(await registry.get(ids.agentId, alreadyEnded)).toMatchObject({ endReason: 'client' });
    expect(await registry.findLive(otherKey)).toMatchObject({ status: 'active' });
    expect(await endSessionsOfKeys(handle.db, [], 'key_revoked', new Date(clock.now))).toEqual([]);

    expect(events).toEqual(ended.map((e) => ({ kind: 'session.ended', sessionId: e.sessionId, agentId: ids.agentId })));
  });

  it('serves a live session from memory: a change event (or the TTL) makes the next request read Postgres again', async () => {
    const id = await open();
    expect(await registry.findLive(id)).toMatchObject({ id });
    // Ended behind the registry's back (as another replica's transaction would): still served until told.
    await handle.db.update(schema.toolSessions).set({ status: 'terminated', endReason: 'reset' }).where(eq(schema.toolSessions.id, id));
    expect(await registry.findLive(id)).toMatchObject({ id });
    bus.publishChange({ kind: 'session.ended', sessionId: id, agentId: ids.agentId });
    await delivered();
    expect(await registry.findLive(id)).toBeUndefined();

    const other = await open();
    expect(await registry.findLive(other)).toMatchObject({ id: other });
    await handle.db.update(schema.toolSessions).set({ status: 'terminated', endReason: 'reset' }).where(eq(schema.toolSessions.id, other));
    clock.now += 10_001;
    expect(await registry.findLive(other)).toBeUndefined();

    const revoked = await open();
    expect(await registry.findLive(revoked)).toMatchObject({ id: revoked });
    await handle.db.delete(schema.toolSessions).where(eq(schema.toolSessions.id, revoked));
    bus.publishChange({ kind: 'key.revoked', keyId: ids.keyId, agentId: ids.agentId });
    await delivered();
    expect(await registry.findLive(revoked)).toBeUndefined();
  });

  it('decision 032: a stateless stream has one live session across replicas; after it ends or idles out, the next call opens a new one', async () => {
    const [key] = await handle.db.insert(schema.memberKeys).values({ memberId: ids.memberId, keyHash: 'h-stream', displaySuffix: 'strm' }).returning();
    const stream = { ...ids, keyId: key!.id, clientName: 'agent-cli', clientVersion: '3', protocolVersion: '2026-07-28', handle: '' };
    const replica = createSessionRegistry({ db: handle.db, bus, idleMs: IDLE_MS, flushMs: 60_000, now: () => clock.now });
    try {
      // Two replicas see the stream's first calls at once: one session, whoever inserts first.
      const [a, b, c] = await Promise.all([registry.streamSession(stream), replica.streamSession(stream), registry.streamSession(stream)]);
      expect(new Set([a.id, b.id, c.id]).size).toBe(1);
      expect(a).toMatchObject({ clientName: 'agent-cli', clientVersion: '3', protocolVersion: '2026-07-28', clientHandle: '', status: 'active' });
      // Another handle, or another client name, is another stream.
      const other = await registry.streamSession({ ...stream, handle: 'conversation-2' });
      const renamed = await registry.streamSession({ ...stream, clientName: 'other-cli' });
      expect(new Set([a.id, other.id, renamed.id]).size).toBe(3);

      // Reset on one replica: the other replica's next call of the stream opens a fresh session.
      await registry.end(a.id, 'reset');
      await delivered();
      const afterReset = await replica.streamSession(stream);
      expect(afterReset.id).not.toBe(a.id);
      expect((await registry.streamSession(stream)).id).toBe(afterReset.id);

      // Idle past the window: the next call ends it as expired and opens another.
      clock.now += IDLE_MS + 1;
      const afterIdle = await registry.streamSession(stream);
      expect(afterIdle.id).not.toBe(afterReset.id);
      expect(await registry.get(ids.agentId, afterReset.id)).toMatchObject({ status: 'terminated', endReason: 'expired' });
      // A session opened by initialize is no stream's, whatever its client name.
      const initialized = randomUUID();
      await registry.open({ id: initialized, ...ids, keyId: key!.id, clientName: 'agent-cli', clientVersion: '3', protocolVersion: '2025-11-25' });
      expect((await replica.streamSession(stream)).id).toBe(afterIdle.id);
    } finally {
      await replica.close();
    }
  });
});
