import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNatsBus, NO_ALLOWED_DESTINATIONS, type AuditEntry, type Bus } from '@portcullis/core';
import { deleteTestStreams, TEST_NATS_URL, uniqueSubjectPrefix } from '@portcullis/core/testing';
import { makeEntry } from '../testing/audit-entries.ts';
import { retryDelay, startSinkWorker } from './sink-worker.ts';

/**
 * Two audit replicas run a worker for the same sink on real NATS JetStream (decision 055): the
 * lease lets one deliver at a time, so every entry arrives once, in order, one request at a
 * time; when the holder stops, the other takes over where it left off.
 */
const prefix = uniqueSubjectPrefix('sinklease');
let replicas: Bus[] = [];
let receiver: Server;
let url = '';
const ids: string[] = [];
let inFlight = 0;
let overlapped = false;

beforeAll(async () => {
  receiver = createServer((req, res) => {
    inFlight += 1;
    if (inFlight > 1) overlapped = true;
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      // A little slow, so the two workers would overlap if both delivered.
      setTimeout(() => {
        inFlight -= 1;
        ids.push(...(JSON.parse(body) as { entries: AuditEntry[] }).entries.map((e) => e.id));
        res.writeHead(204).end();
      }, 20);
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  replicas = await Promise.all(['a', 'b'].map((name) => createNatsBus({ url: TEST_NATS_URL, subjectPrefix: prefix, name: `replica-${name}` })));
});
afterAll(async () => {
  for (const bus of replicas) await bus.close();
  receiver?.closeAllConnections();
  receiver?.close();
  await deleteTestStreams(TEST_NATS_URL, prefix);
});

async function until(what: string, condition: () => boolean, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('sink workers on two replicas', () => {
  it('deliver each entry once and in order, one request at a time, and hand over when the holder stops', async () => {
    const agentId = randomUUID();
    const target = { kind: 'webhook' as const, id: randomUUID(), url, secret: 'lease-test-secret-0000' };
    await replicas[0]!.sinkFeed.open(target.id, agentId);
    const leases = await Promise.all(replicas.map((bus) => bus.keyValue('audit-sink-leases', { ttlMs: 1_500 })));
    const worker = (i: number) => startSinkWorker({
      target, destinations: { production: false, allowed: NO_ALLOWED_DESTINATIONS }, agentId, feed: replicas[i]!.sinkFeed, leases: leases[i]!, outcomes: { delivered: () => undefined, failed: () => undefined },
      batchSize: 20, maxWaitMs: 50, retryBaseMs: 50, retryMaxMs: 200, leaseTtlMs: 1_500,
    });
    const batch = (day: number, n: number) => Array.from({ length: n }, (_, i) => makeEntry({ agentId, timestamp: new Date(Date.UTC(2026, 10, day) + i).toISOString() }));

    // Replica A's worker takes the lease; then B's starts beside it and waits.
    const a = worker(0);
    const first = batch(1, 50);
    await replicas[1]!.sinkFeed.publish(first);
    await until('the first 50 entries', () => ids.length >= 50);
    const b = worker(1);
    const second = batch(2, 100);
    await replicas[1]!.sinkFeed.publish(second);
    await until('150 entries', () => ids.length >= 150);

    // A stops (a replica shut down) and gives the lease back; B carries on with the next entries.
    await a.stop();
    const third = batch(3, 60);
    await replicas[0]!.sinkFeed.publish(third);
    await until('210 entries', () => ids.length >= 210);
    await b.stop();

    expect(ids).toEqual([...first, ...second, ...third].map((e) => e.id));
    expect(overlapped).toBe(false);
    expect(await replicas[0]!.sinkFeed.lag(target.id)).toBe(0);
  });

  it('backs off exponentially with jitter, capped', () => {
    for (let failures = 0; failures < 12; failures++) {
      const capped = Math.min(60_000, 1_000 * 2 ** failures);
      const delay = retryDelay(failures, 1_000, 60_000);
      expect(delay).toBeGreaterThanOrEqual(capped / 2);
      expect(delay).toBeLessThanOrEqual(capped);
    }
  });
});
