import { describe, expect, it } from 'vitest';
import { createFairTurns, forTenant, tenantOfRequest } from './engine-turns.ts';

describe('engine turns (decision 069)', () => {
  it('runs one at a time, and a tenant with many queued waits behind another tenant\'s one', async () => {
    const turns = createFairTurns();
    const order: string[] = [];
    let releaseFirst!: () => void;
    const first = forTenant('b', () => turns.run(() => new Promise<void>((r) => { order.push('b0'); releaseFirst = r; })));
    const queued = [
      ...[1, 2, 3].map((i) => forTenant('b', () => turns.run(async () => { order.push(`b${i}`); }))),
      forTenant('a', () => turns.run(async () => { order.push('a1'); })),
    ];
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual(['b0']);
    releaseFirst();
    await Promise.all([first, ...queued]);
    // First come first served would be b0 b1 b2 b3 a1: A's one query goes after one of B's.
    expect(order).toEqual(['b0', 'b1', 'a1', 'b2', 'b3']);
  });

  it('passes the turn on when work fails, and hands the failure to its caller', async () => {
    const turns = createFairTurns();
    const failed = turns.run(async () => { throw new Error('engine said no'); });
    const next = turns.run(async () => 'ran');
    await expect(failed).rejects.toThrow('engine said no');
    await expect(next).resolves.toBe('ran');
  });

  it('names a request\'s tenant by the agents it may read, in any order', () => {
    expect(tenantOfRequest({ filter: { agentIds: ['y', 'x'] } })).toBe('x,y');
    expect(tenantOfRequest({ agentIds: ['x', 'y'] })).toBe('x,y');
    expect(tenantOfRequest({ agentId: 'x' })).toBe('x');
    expect(tenantOfRequest({})).toBe('');
  });
});
