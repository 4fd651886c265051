import { describe, expect, it } from 'vitest';
import { createFairTurns, forTenant, tenantOfRequest } from './engine-turns.ts';

describe('engine turns (decision 069)', () => {
  it('runs one at a time, and a tenant with many queued waits behind another tenant\'s one', async () => {
    let now = 0;
    const turns = createFairTurns({ now: () => now, creditMs: 0 });
    const order: string[] = [];
    let releaseFirst!: () => void;
    const first = forTenant('b', () => turns.run(() => new Promise<void>((r) => { order.push('b0'); releaseFirst = r; })));
    const queued = [
      ...[1, 2, 3].map((i) => forTenant('b', () => turns.run(async () => { order.push(`b${i}`); }))),
      forTenant('a', () => turns.run(async () => { order.push('a1'); })),
    ];
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual(['b0']);
    now += 20; // B's turn took 20 ms of engine time
    releaseFirst();
    await Promise.all([first, ...queued]);
    // First come first served would be b0 b1 b2 b3 a1: A, which has used nothing, goes next.
    expect(order).toEqual(['b0', 'a1', 'b1', 'b2', 'b3']);
  });

  it('shares the engine by the time each tenant used, and a tenant back from idle starts at the clock', async () => {
    let now = 0;
    const turns = createFairTurns({ now: () => now, creditMs: 0 });
    const order: string[] = [];
    const job = (tenant: string, ms: number) => forTenant(tenant, () => turns.run(async () => { order.push(tenant); now += ms; }));
    // B's turns take 30 ms each, A's 10 ms: while both wait, A gets three turns for each of B's.
    await Promise.all([job('b', 30), job('b', 30), job('b', 30), job('a', 10), job('a', 10), job('a', 10), job('a', 10), job('a', 10)]);
    expect(order).toEqual(['b', 'a', 'a', 'a', 'b', 'a', 'a', 'b']);
    // C was idle all along: it does not get the whole engine to catch up, it starts at the clock.
    order.length = 0;
    await Promise.all([job('b', 30), job('b', 30), job('c', 30), job('c', 30), job('c', 30)]);
    expect(order).toEqual(['b', 'c', 'b', 'c', 'c']);
  });

  it('gives a tenant that starts waiting a short burst ahead of one that keeps the engine busy, and no more', async () => {
    let now = 0;
    const turns = createFairTurns({ now: () => now, creditMs: 50 });
    const order: string[] = [];
    const job = (tenant: string, ms: number) => forTenant(tenant, () => turns.run(async () => { order.push(tenant); now += ms; }));
    // B keeps the engine busy; A's request (three statements of 10 ms) arrives while B has five waiting.
    const b = Array.from({ length: 10 }, () => job('b', 10));
    await b[4];
    const a = [job('a', 10), job('a', 10), job('a', 10)];
    await Promise.all([...b, ...a]);
    // Without the credit A and B would alternate (… b a b a b a b …): A's request runs through after B's running turn.
    expect(order).toEqual(['b', 'b', 'b', 'b', 'b', 'a', 'a', 'a', 'b', 'b', 'b', 'b', 'b']);
    // A tenant that stays busy is back to an equal share once its burst is spent: C's twelve
    // turns do not all go before B's.
    order.length = 0;
    const busy = Array.from({ length: 12 }, () => job('b', 10));
    await busy[2];
    await Promise.all([...busy, ...Array.from({ length: 12 }, () => job('c', 10))]);
    // B's three, C's burst of about 50 ms, then turn and turn about.
    expect(order.join('')).toBe('bbbccccccbcbcbcbcbcbcbbb');
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
