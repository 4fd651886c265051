import { afterEach, describe, expect, it } from 'vitest';
import type { PolicyRepo } from '../store/policy-repo.ts';
import { PolicyServiceError } from '../errors.ts';
import { evaluate } from './evaluate.ts';
import { createPolicyCache, type PolicyCache } from './policy-cache.ts';
import type { AgentPolicySnapshot } from './prepared-set.ts';

const AGENT = '00000000-0000-4000-8000-0000000000aa';

/** The store as the cache sees it: snapshots by agent, each read counted, reads optionally held. */
function memoryRepo() {
  const snapshots = new Map<string, AgentPolicySnapshot>();
  let held: Array<() => void> | undefined;
  const repo = {
    reads: 0,
    failWith: undefined as Error | undefined,
    set(policyVersion: number, agentStatus = 'active') {
      snapshots.set(AGENT, { agentId: AGENT, agentStatus, policyVersion, policies: [] });
    },
    /** Reads wait until `release()`; the snapshot is taken when released. */
    hold() { held = []; },
    release() { const waiting = held ?? []; held = undefined; for (const go of waiting) go(); },
    async loadAgentPolicies(agentId: string) {
      repo.reads += 1;
      if (held) await new Promise<void>((resolve) => held!.push(resolve));
      if (repo.failWith) throw repo.failWith;
      return snapshots.get(agentId);
    },
  } satisfies PolicyRepo & Record<string, unknown>;
  return repo;
}

describe('policy cache', () => {
  let cache: PolicyCache | undefined;
  afterEach(() => cache?.close());

  it('builds a set on first use and answers from memory afterwards', async () => {
    const repo = memoryRepo();
    repo.set(1);
    cache = createPolicyCache({ repo });
    expect(cache.peek(AGENT, 0)).toBeUndefined();
    const set = await cache.load(AGENT, 1);
    expect(set?.policyVersion).toBe(1);
    expect(cache.peek(AGENT, 0)).toBe(set);
    expect(cache.peek(AGENT, 1)).toBe(set);
    expect(repo.reads).toBe(1);
  });

  it('reads the store once for concurrent first calls', async () => {
    const repo = memoryRepo();
    repo.set(1);
    repo.hold();
    cache = createPolicyCache({ repo });
    const loads = Promise.all([cache.load(AGENT, 1), cache.load(AGENT, 1), cache.load(AGENT, 0)]);
    repo.release();
    const [a, b, c] = await loads;
    expect(a).toBe(b);
    expect(b).toBe(c);
    expect(repo.reads).toBe(1);
  });

  it('reloads when a caller has seen a newer version than the cached one', async () => {
    const repo = memoryRepo();
    repo.set(1);
    cache = createPolicyCache({ repo });
    await cache.load(AGENT, 1);
    repo.set(2);
    expect(cache.peek(AGENT, 2)).toBeUndefined();
    expect((await cache.load(AGENT, 2))?.policyVersion).toBe(2);
    expect(cache.peek(AGENT, 2)?.policyVersion).toBe(2);
  });

  it('trusts the store when it is behind the caller, instead of reading it on every call', async () => {
    const repo = memoryRepo();
    repo.set(1);
    cache = createPolicyCache({ repo });
    const set = await cache.load(AGENT, 5);
    expect(set?.policyVersion).toBe(1);
    expect(cache.peek(AGENT, 5)).toBe(set);
    expect(cache.peek(AGENT, 6)).toBeUndefined();
  });

  it('drops a set on policy.changed with a newer version, and ignores stale events', async () => {
    const repo = memoryRepo();
    repo.set(3);
    cache = createPolicyCache({ repo });
    const set = await cache.load(AGENT, 0);
    cache.handleChange({ kind: 'policy.changed', agentId: AGENT, policyVersion: 3 });
    cache.handleChange({ kind: 'policy.changed', agentId: AGENT, policyVersion: 2 });
    cache.handleChange({ kind: 'key.revoked', agentId: AGENT, keyId: 'k' });
    expect(cache.peek(AGENT, 0)).toBe(set);
    cache.handleChange({ kind: 'policy.changed', agentId: AGENT, policyVersion: 4 });
    expect(cache.peek(AGENT, 0)).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('drops a set on agent.changed (its status may have changed)', async () => {
    const repo = memoryRepo();
    repo.set(1);
    cache = createPolicyCache({ repo });
    await cache.load(AGENT, 0);
    repo.set(1, 'disabled');
    cache.handleChange({ kind: 'agent.changed', agentId: AGENT });
    expect(cache.peek(AGENT, 0)).toBeUndefined();
    expect((await cache.load(AGENT, 0))?.agentStatus).toBe('disabled');
  });

  it('answers the waiting callers but does not keep a load that a change overtook', async () => {
    const repo = memoryRepo();
    repo.set(1);
    repo.hold();
    cache = createPolicyCache({ repo });
    const pending = cache.load(AGENT, 0);
    cache.handleChange({ kind: 'policy.changed', agentId: AGENT, policyVersion: 2 });
    repo.release();
    expect((await pending)?.policyVersion).toBe(1);
    expect(cache.peek(AGENT, 0)).toBeUndefined();
    repo.set(2);
    expect((await cache.load(AGENT, 0))?.policyVersion).toBe(2);
  });

  it('does not remember an unknown agent', async () => {
    const repo = memoryRepo();
    cache = createPolicyCache({ repo });
    expect(await cache.load(AGENT, 0)).toBeUndefined();
    repo.set(1);
    expect((await cache.load(AGENT, 0))?.policyVersion).toBe(1);
    expect(repo.reads).toBe(2);
  });

  it('passes a store failure on and keeps nothing', async () => {
    const repo = memoryRepo();
    repo.set(1);
    repo.failWith = new PolicyServiceError('unavailable', 'The policy store cannot be read');
    cache = createPolicyCache({ repo });
    await expect(cache.load(AGENT, 0)).rejects.toMatchObject({ code: 'unavailable' });
    expect(cache.size).toBe(0);
    repo.failWith = undefined;
    expect((await cache.load(AGENT, 0))?.policyVersion).toBe(1);
  });

  it('frees a replaced set only after a grace period, and everything on close', async () => {
    const repo = memoryRepo();
    repo.set(1);
    cache = createPolicyCache({ repo, retireDelayMs: 20 });
    const old = (await cache.load(AGENT, 0))!;
    const member = { id: 'm', role: 'member', status: 'approved', email: 'm@example.com' };
    const input = (tool: string) => ({ agentId: AGENT, member, service: 'github', tool, args: {}, nowMs: Date.now() });
    repo.set(2);
    const current = (await cache.load(AGENT, 2))!;
    expect(evaluate(old, input('get_me')).decision).toBe('ALLOW'); // still usable right after replacement
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(evaluate(old, input('create_branch')).decision).toBe('DENY'); // freed
    expect(evaluate(current, input('create_branch')).decision).toBe('ALLOW');
    cache.close();
    expect(evaluate(current, input('delete_file')).decision).toBe('DENY');
    cache = undefined;
  });
});
