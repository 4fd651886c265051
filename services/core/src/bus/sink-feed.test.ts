import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import type { AuditEntry } from '../audit-entry.ts';
import { deleteTestStreams, TEST_NATS_URL, uniqueSubjectPrefix } from '../testing/index.ts';
import type { Bus } from './bus.ts';
import { createMemoryBus } from './memory-bus.ts';
import { createNatsBus } from './nats-bus.ts';

const entry = (agentId: string): AuditEntry => ({
  id: randomUUID(), timestamp: new Date().toISOString(), agentId, agentName: 'A', memberId: 'm', memberName: 'm@x', memberKeyId: 'k',
  service: 'github', tool: 'get_me', action: 'GithubMCP::Action::"get_me"', resource: 'GithubMCP::Service::"github"', callerIp: '127.0.0.1',
  toolArgs: {}, decision: 'ALLOW', reason: 'No forbid policy matched', matchedPolicyIds: [], matchedPolicyNames: [], policyVersionIds: [], policyDbIds: [],
  durationMs: 1, principal: 'Portcullis::Member::"m"',
});

async function until(what: string, condition: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const prefix = uniqueSubjectPrefix('sinkfeed');
afterAll(() => deleteTestStreams(TEST_NATS_URL, prefix));

describe.each([
  ['in-process', async () => createMemoryBus()],
  ['NATS JetStream', async () => createNatsBus({ url: TEST_NATS_URL, subjectPrefix: prefix })],
] as const)('sink feed on the %s bus (decision 055)', (_name, open) => {
  it('keeps a sink\'s own agent\'s entries from its opening on, in order, once per id, until acknowledged; a failed batch comes back first', async () => {
    const bus: Bus = await open();
    try {
      const agent = randomUUID();
      const other = randomUUID();
      const sinkId = randomUUID();
      await bus.sinkFeed.publish([entry(agent)]); // before the sink existed: not for it
      await bus.sinkFeed.open(sinkId, agent);
      await bus.sinkFeed.open(sinkId, agent); // idempotent
      const first = Array.from({ length: 30 }, () => entry(agent));
      await bus.sinkFeed.publish([...first.slice(0, 10), entry(other)]);
      await bus.sinkFeed.publish([...first.slice(0, 10), ...first.slice(10)]); // a redelivered batch's repeats
      await until('lag of 30', async () => (await bus.sinkFeed.lag(sinkId)) === 30);

      const received: string[] = [];
      let failures = 0;
      const consumer = await bus.sinkFeed.consume(sinkId, {
        batchSize: 8,
        maxWaitMs: 50,
        async handle(batch) {
          if (received.length >= 8 && failures === 0) { failures += 1; throw new Error('sink down'); }
          received.push(...batch.map((e) => e.id));
        },
      });
      await until('all 30 delivered', () => received.length >= 30);
      await consumer.stop();
      expect(failures).toBe(1);
      expect(received).toEqual(first.map((e) => e.id));
      await until('lag back to 0', async () => (await bus.sinkFeed.lag(sinkId)) === 0);

      await bus.sinkFeed.remove(sinkId);
      expect(await bus.sinkFeed.lag(sinkId)).toBeUndefined();
    } finally {
      await bus.close();
    }
  });
});
