import { describe, expect, it } from 'vitest';
import { ApiError } from '@portcullis/core';
import { createWorkGate } from './work-gates.ts';
import { createTokenBuckets } from './token-buckets.ts';

const limits = { slots: 2, perUser: 2, perAgent: 2, queuePerUser: 3, maxWaitMs: 5_000 };
const tick = () => new Promise((r) => setImmediate(r));

describe('work gates (decision 069)', () => {
  it('gives a freed turn to the next user in turn, not to the user who already holds the others', async () => {
    const gate = createWorkGate('reads', limits);
    const started: string[] = [];
    const b1 = await gate.acquire({ userId: 'b' });
    const b2 = await gate.acquire({ userId: 'b' });
    // B queues three more, then A arrives with one: A is served at the first freed turn.
    const waiting = [
      gate.acquire({ userId: 'b' }).then((r) => { started.push('b3'); return r; }),
      gate.acquire({ userId: 'b' }).then((r) => { started.push('b4'); return r; }),
      gate.acquire({ userId: 'a' }).then((r) => { started.push('a1'); return r; }),
    ];
    await tick();
    expect(started).toEqual([]);
    expect(gate.load).toEqual({ running: 2, waiting: 3 });
    b1();
    await tick();
    // B's second waiting request had arrived first, but B had its turn: A goes before it.
    expect(started).toEqual(['b3']);
    b2();
    await tick();
    expect(started).toEqual(['b3', 'a1']);
    const releases = await Promise.all(waiting.slice(0, 1).concat(waiting.slice(2)));
    releases.forEach((r) => r());
    await tick();
    expect(started).toEqual(['b3', 'a1', 'b4']);
    (await waiting[1]!)();
    expect(gate.load).toEqual({ running: 0, waiting: 0 });
  });

  it('holds a user to its own share even while turns are free', async () => {
    const gate = createWorkGate('exports', { ...limits, slots: 4, perUser: 1 });
    const first = await gate.acquire({ userId: 'b' });
    let second = false;
    void gate.acquire({ userId: 'b' }).then((release) => { second = true; release(); });
    const other = await gate.acquire({ userId: 'a' });
    await tick();
    expect(second).toBe(false);
    first();
    await tick();
    expect(second).toBe(true);
    other();
  });

  it('counts work over one agent across users', async () => {
    const gate = createWorkGate('simulations', { ...limits, slots: 4, perUser: 2, perAgent: 1 });
    const owner = await gate.acquire({ userId: 'a', agentId: 'x' });
    let member = false;
    void gate.acquire({ userId: 'b', agentId: 'x' }).then((release) => { member = true; release(); });
    const elsewhere = await gate.acquire({ userId: 'b', agentId: 'y' });
    await tick();
    expect(member).toBe(false);
    owner();
    await tick();
    expect(member).toBe(true);
    elsewhere();
  });

  it('refuses with 429 once a user queue is full, and when a wait runs out', async () => {
    const gate = createWorkGate('reads', { ...limits, slots: 1, perUser: 1, queuePerUser: 1, maxWaitMs: 50 });
    const held = await gate.acquire({ userId: 'b' });
    const queued = gate.acquire({ userId: 'b' });
    const refused = await gate.acquire({ userId: 'b' }).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(ApiError);
    expect((refused as ApiError).code).toBe('rate_limited');
    expect((refused as ApiError).status).toBe(429);
    const timedOut = await queued.catch((err: unknown) => err);
    expect((timedOut as ApiError).code).toBe('rate_limited');
    // Nothing was left behind: the next request after the holder gets the turn.
    held();
    const next = await gate.acquire({ userId: 'b' });
    expect(gate.load).toEqual({ running: 1, waiting: 0 });
    next();
  });

  it('forgets a request whose client went away while it waited', async () => {
    const gate = createWorkGate('reads', { ...limits, slots: 1, perUser: 1 });
    const held = await gate.acquire({ userId: 'a' });
    const gone = new AbortController();
    const waiting = gate.acquire({ userId: 'b' }, gone.signal).catch((err: unknown) => err);
    gone.abort();
    expect(await waiting).toBeInstanceOf(ApiError);
    expect(gate.load).toEqual({ running: 1, waiting: 0 });
    held();
    expect(gate.load).toEqual({ running: 0, waiting: 0 });
  });
});

describe('token buckets', () => {
  it('takes from every named bucket or from none, and refills at the rate', () => {
    let now = 0;
    const buckets = createTokenBuckets({ now: () => now });
    const key = { family: 'key', id: 'k', rate: { perSecond: 10, burst: 5 } };
    const agent = { family: 'agent', id: 'a', rate: { perSecond: 100, burst: 6 } };
    for (let i = 0; i < 5; i++) expect(buckets.take([key, agent])).toBeUndefined();
    // The key's bucket is dry: refused, and the agent's bucket keeps its last token.
    expect(buckets.take([key, agent])).toEqual({ bucket: 'key', retryAfterMs: 100 });
    expect(buckets.take([agent])).toBeUndefined();
    expect(buckets.take([agent])?.bucket).toBe('agent');
    now += 100;
    expect(buckets.take([key])).toBeUndefined();
    expect(buckets.take([key])?.bucket).toBe('key');
  });

  it('stays bounded whatever keys a caller makes up', () => {
    let now = 0;
    const buckets = createTokenBuckets({ now: () => now, maxKeys: 100 });
    const rate = { perSecond: 1, burst: 2 };
    for (let i = 0; i < 1_000; i++) {
      buckets.take([{ family: 'ip', id: String(i), rate }]);
      now += 1_000; // each earlier bucket has refilled to full: the same as absent
    }
    expect(buckets.size).toBeLessThanOrEqual(101);
  });
});
