import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryBus, openDatabase, schema, sealSinkSecret, SINK_SIGNATURE_HEADER, verifySinkSignature, type Bus, type DatabaseHandle, type WebhookSinkBody } from '@portcullis/core';
import { loadAuditConfig } from '../config.ts';
import { startAuditService, type AuditService } from '../server.ts';
import { makeEntry, makeTempDir } from '../testing/audit-entries.ts';

/**
 * The single-process path (decision 055): the audit service on the in-process bus, the sinks
 * read from an embedded Postgres (PGlite), a real HTTP receiver. Write-ahead records reach
 * the sink once, as their completion; a paused sink collects and catches up when resumed.
 */
const SECRET = 'worker-test-secret-1234';
const SERVER_SECRET = 'x'.repeat(40);
const dir = makeTempDir('sinks');

let bus: Bus;
let database: DatabaseHandle;
let service: AuditService;
let receiver: Server;
let url = '';
const received: WebhookSinkBody[] = [];

beforeAll(async () => {
  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      if (!verifySinkSignature(SECRET, req.headers[SINK_SIGNATURE_HEADER] as string | undefined, body)) { res.writeHead(401).end(); return; }
      received.push(JSON.parse(body) as WebhookSinkBody);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  bus = createMemoryBus();
  database = await openDatabase({ DATA_DIR: dir.path });
  const config = loadAuditConfig({ NODE_ENV: 'test', DATA_DIR: dir.path, GRPC_ADDRESS: '127.0.0.1:0', AUDIT_BATCH_MAX_WAIT_MS: '20', AUDIT_SINK_RETRY_MAX_MS: '200' });
  service = await startAuditService(config, { bus, sinks: { db: database.db, serverSecret: SERVER_SECRET }, log: () => undefined });
});
afterAll(async () => {
  await service?.close();
  await bus?.close();
  await database?.close();
  receiver?.closeAllConnections();
  receiver?.close();
  dir.remove();
});

async function until(what: string, condition: () => boolean, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('sink workers in the single-process product', () => {
  it('deliver each call once, as its final entry, in order; a paused sink collects and catches up when resumed', async () => {
    const [user] = await database.db.insert(schema.users).values({ email: `sink-${randomUUID()}@example.com` }).returning();
    const [agent] = await database.db.insert(schema.agents).values({ name: 'Streamed', createdBy: user!.id }).returning();
    const [sink] = await database.db.insert(schema.auditSinks).values({ agentId: agent!.id, kind: 'webhook', name: 'hook', url, secretSealed: sealSinkSecret(SERVER_SECRET, SECRET) }).returning();
    await bus.sinkFeed.open(sink!.id, agent!.id); // what the API does on creation
    await new Promise((r) => setTimeout(r, 2_500)); // the workers read the sinks every 2 s

    const start = Date.now();
    const calls = Array.from({ length: 6 }, (_, i) => makeEntry({ agentId: agent!.id, timestamp: new Date(start + i).toISOString() }));
    // An allowed call's write-ahead record, then its completion; and another agent's entry, which is not for this sink.
    for (const call of calls) {
      await bus.publishAudit({ ...call, stage: 'decision', reason: 'No forbid policy matched; outcome not recorded' });
      await bus.publishAudit({ ...call, stage: 'complete' });
    }
    await bus.publishAudit(makeEntry({ agentId: 'another-agent' }));
    await until('6 entries at the sink', () => received.flatMap((b) => b.entries).length >= 6);
    const delivered = received.flatMap((b) => b.entries);
    expect(delivered.map((e) => e.id)).toEqual(calls.map((c) => c.id));
    expect(delivered.every((e) => e.reason === calls[0]!.reason && !('stage' in e) && Array.isArray(e.policyDbIds))).toBe(true);

    // Paused: nothing goes out, the entries wait (lag); resumed: they arrive.
    await database.db.update(schema.auditSinks).set({ enabled: false, updatedAt: new Date() });
    await new Promise((r) => setTimeout(r, 2_500));
    const later = Array.from({ length: 3 }, () => makeEntry({ agentId: agent!.id }));
    for (const e of later) await bus.publishAudit(e);
    await new Promise((r) => setTimeout(r, 1_500)); // time enough to deliver, were it not paused
    expect(await bus.sinkFeed.lag(sink!.id)).toBe(3);
    expect(received.flatMap((b) => b.entries)).toHaveLength(6);
    await database.db.update(schema.auditSinks).set({ enabled: true, updatedAt: new Date() });
    await until('9 entries at the sink', () => received.flatMap((b) => b.entries).length >= 9);
    expect(received.flatMap((b) => b.entries).map((e) => e.id).slice(6)).toEqual(later.map((e) => e.id));
    const [row] = await database.db.select().from(schema.auditSinks);
    expect(row!.lastDeliveredAt).not.toBeNull();

    // The agent is deleted (its sinks with it, by the foreign key): the sink's queue goes too.
    await database.db.delete(schema.agents);
    await new Promise((r) => setTimeout(r, 2_500)); // the next read of the sinks
    expect(await bus.sinkFeed.lag(sink!.id)).toBeUndefined();
  });
});
