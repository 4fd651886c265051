import { describe, expect, it } from 'vitest';
import { uuidv7 } from 'uuidv7';
import type { AuditEntry } from '../audit-entry.ts';
import { createMemoryBus } from './memory-bus.ts';

const entry = (over: Partial<AuditEntry> = {}): AuditEntry => ({
  id: uuidv7(), timestamp: new Date().toISOString(), agentId: 'a', agentName: 'A', memberId: 'm', memberName: 'm@x', memberKeyId: 'k',
  service: 'github', tool: 'get_me', action: 'GithubMCP::Action::"get_me"', resource: 'GithubMCP::Service::"github"', callerIp: '127.0.0.1',
  toolArgs: {}, decision: 'ALLOW', reason: 'No forbid policy matched', matchedPolicyIds: [], matchedPolicyNames: [], policyVersionIds: [], policyDbIds: [],
  durationMs: 1, principal: 'Portcullis::Member::"m"', ...over,
});

describe('in-process bus', () => {
  it('stores a repeated entry id once, redelivers a failed batch, and drains everything on stop', async () => {
    const bus = createMemoryBus();
    const written: string[] = [];
    let failOnce = true;
    const consumer = await bus.consumeAudit({
      batchSize: 10,
      maxWaitMs: 20,
      handle: async (batch) => {
        if (failOnce) { failOnce = false; throw new Error('store down'); }
        written.push(...batch.map((e) => e.id));
      },
    });
    const first = entry();
    await bus.publishAudit(first);
    await bus.publishAudit(first);
    const rest = Array.from({ length: 25 }, () => entry());
    for (const e of rest) await bus.publishAudit(e);
    await consumer.drain();
    expect(written.sort()).toEqual([first, ...rest].map((e) => e.id).sort());
  });

  it('hands the handler checked entries only: a malformed one is dead-lettered, the rest of its batch written', async () => {
    const bus = createMemoryBus();
    const written: AuditEntry[] = [];
    const deadLettered: string[] = [];
    const consumer = await bus.consumeAudit({
      batchSize: 10,
      maxWaitMs: 20,
      handle: async (batch) => { written.push(...batch); },
      onDeadLetter: (raw, error) => deadLettered.push(`${error}: ${raw}`),
    });
    const good = entry({ toolArgs: { q: 'x' } });
    await bus.publishAudit({ ...entry(), decision: 'MAYBE' } as unknown as AuditEntry);
    await bus.publishAudit({ ...good, unexpected: 'dropped' } as AuditEntry);
    await consumer.drain();
    expect(written).toEqual([good]);
    expect(deadLettered).toHaveLength(1);
    expect(deadLettered[0]).toMatch(/^not a valid audit entry: .*"decision":"MAYBE"/);
  });

  it('fans change events out to every listener', async () => {
    const bus = createMemoryBus();
    const seen: string[] = [];
    bus.onChange((e) => seen.push(`1:${e.kind}`));
    bus.onChange((e) => seen.push(`2:${e.kind}`));
    bus.publishChange({ kind: 'agent.changed', agentId: 'x' });
    await new Promise((r) => setTimeout(r, 10));
    expect(seen.sort()).toEqual(['1:agent.changed', '2:agent.changed']);
  });
});
