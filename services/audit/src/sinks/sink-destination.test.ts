import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eq } from 'drizzle-orm';
import { createMemoryBus, NO_ALLOWED_DESTINATIONS, openDatabase, schema, sealSinkSecret, type Bus, type ConnectTarget, type DatabaseHandle, type OutboundRule } from '@portcullis/core';
import { makeEntry, makeTempDir } from '../testing/audit-entries.ts';
import { startSinkWorkers, type SinkWorkers } from './sink-workers.ts';

/**
 * Delivery re-checks the destination rule (issue 29, decision 058): a sink whose name resolved
 * publicly when it was created and resolves internally now fails with "destination not
 * allowed", and nothing connects. The resolver and the connector are injected; the connector
 * records every call, so the test fails if one is made.
 */
const SERVER_SECRET = 'y'.repeat(40);
const dir = makeTempDir('sink-destination');
let bus: Bus;
let database: DatabaseHandle;
let workers: SinkWorkers;
const connected: ConnectTarget[] = [];
const resolved: string[] = [];

beforeAll(async () => {
  bus = createMemoryBus();
  database = await openDatabase({ DATA_DIR: dir.path });
  const destinations: OutboundRule = {
    production: true,
    allowed: NO_ALLOWED_DESTINATIONS,
    // siem.example.com now resolves to an internal address.
    resolve: async (name) => { resolved.push(name); return [{ address: '10.0.0.5', family: 4 }]; },
    connect: (target) => { connected.push(target); throw new Error('a refused destination was connected to'); },
  };
  workers = await startSinkWorkers({ db: database.db, bus, serverSecret: SERVER_SECRET, log: () => undefined, destinations, refreshMs: 100, retryBaseMs: 50, retryMaxMs: 100 });
});
afterAll(async () => {
  await workers?.stop();
  await bus?.close();
  await database?.close();
  dir.remove();
});

describe('sink delivery under the destination rule', () => {
  it('fails with "destination not allowed" once the sink\'s name resolves internally, and never connects', async () => {
    const [user] = await database.db.insert(schema.users).values({ email: `dest-${randomUUID()}@example.com` }).returning();
    const [agent] = await database.db.insert(schema.agents).values({ name: 'Guarded', createdBy: user!.id }).returning();
    const [sink] = await database.db.insert(schema.auditSinks).values({
      agentId: agent!.id, kind: 'webhook', name: 'SIEM', url: 'https://siem.example.com/hook', secretSealed: sealSinkSecret(SERVER_SECRET, 'sink-secret-0123456789'),
    }).returning();
    await bus.sinkFeed.open(sink!.id, agent!.id);
    await bus.publishChange({ kind: 'agent.changed', agentId: agent!.id });
    await bus.sinkFeed.publish([makeEntry({ agentId: agent!.id })]);

    const deadline = Date.now() + 10_000;
    let lastError: string | null = null;
    while (!lastError && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
      [{ lastError }] = await database.db.select({ lastError: schema.auditSinks.lastError }).from(schema.auditSinks).where(eq(schema.auditSinks.id, sink!.id)) as [{ lastError: string | null }];
    }
    expect(lastError).toMatch(/^destination not allowed: the sink's URL must reach a public address/);
    expect(resolved).toContain('siem.example.com');
    expect(connected).toEqual([]);
    expect(await bus.sinkFeed.lag(sink!.id)).toBe(1); // kept for when the operator allows it or the owner fixes the URL
  });
});
