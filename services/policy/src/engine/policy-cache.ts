import type { ChangeEvent } from '@portcullis/core';
import type { PolicyRepo } from '../store/policy-repo.ts';
import { preparePolicySet, type PreparedPolicySet } from './prepared-set.ts';

/**
 * One prepared policy set per agent, built on first use and kept until a change makes it
 * stale. Staleness is known two ways: a `policy.changed` / `agent.changed` event from the
 * bus, and the version number a request carries (the caller has seen a newer set than the
 * one cached: reload before deciding). A cached decision touches no database.
 */
export interface PolicyCache {
  /** The cached set when it is at least `minVersion`; synchronous, for the hot path. */
  peek(agentId: string, minVersion: number): PreparedPolicySet | undefined;
  /**
   * Loads (or joins a load already running) and caches the agent's set; undefined when the
   * agent does not exist. Rejects with `PolicyServiceError('unavailable')` when the store fails.
   */
  load(agentId: string, minVersion: number): Promise<PreparedPolicySet | undefined>;
  /** Applies a bus event: drops what it makes stale. */
  handleChange(event: ChangeEvent): void;
  /** Number of agents cached. */
  readonly size: number;
  /** Frees every prepared set; the cache must not be used afterwards. */
  close(): void;
}

export interface PolicyCacheDeps {
  repo: Pick<PolicyRepo, 'loadAgentPolicies'>;
  /**
   * How long a replaced set stays parsed before its Cedar memory is freed: a request that
   * picked it up just before the replacement may still evaluate it. Default 10 s.
   */
  retireDelayMs?: number;
}

interface Entry {
  set: PreparedPolicySet;
  /** Requests carrying a version up to this are served: the store was asked after the caller saw it. */
  servesUpTo: number;
}

interface Load {
  promise: Promise<PreparedPolicySet | undefined>;
  /** A change arrived while loading: the result may predate it, so it is not cached. */
  stale: boolean;
}

export function createPolicyCache(deps: PolicyCacheDeps): PolicyCache {
  const retireDelayMs = deps.retireDelayMs ?? 10_000;
  const entries = new Map<string, Entry>();
  const loads = new Map<string, Load>();
  const retiring = new Map<NodeJS.Timeout, PreparedPolicySet>();
  let sequence = 0;
  let closed = false;

  const retire = (set: PreparedPolicySet) => {
    if (closed) return set.release();
    const timer = setTimeout(() => {
      retiring.delete(timer);
      set.release();
    }, retireDelayMs);
    timer.unref();
    retiring.set(timer, set);
  };

  const drop = (agentId: string) => {
    const entry = entries.get(agentId);
    if (!entry) return;
    entries.delete(agentId);
    retire(entry.set);
  };

  const invalidate = (agentId: string) => {
    drop(agentId);
    const load = loads.get(agentId);
    if (load) load.stale = true;
  };

  const startLoad = (agentId: string, minVersion: number): Load => {
    const load: Load = { stale: false, promise: Promise.resolve(undefined) };
    load.promise = (async () => {
      try {
        const snapshot = await deps.repo.loadAgentPolicies(agentId);
        if (!snapshot) {
          if (!load.stale) drop(agentId);
          return undefined;
        }
        // A fresh Cedar id per build: a set being evaluated never changes underneath.
        sequence += 1;
        const set = preparePolicySet(snapshot, `${agentId}:${snapshot.policyVersion}:${sequence}`);
        if (load.stale || closed) {
          retire(set); // answers the callers that were waiting, is not kept
        } else {
          const previous = entries.get(agentId);
          // If the store is behind the caller's version, trust the store rather than reload on every call.
          entries.set(agentId, { set, servesUpTo: Math.max(snapshot.policyVersion, minVersion) });
          if (previous) retire(previous.set);
        }
        return set;
      } finally {
        if (loads.get(agentId) === load) loads.delete(agentId);
      }
    })();
    loads.set(agentId, load);
    return load;
  };

  const peek = (agentId: string, minVersion: number): PreparedPolicySet | undefined => {
    const entry = entries.get(agentId);
    return entry !== undefined && minVersion <= entry.servesUpTo ? entry.set : undefined;
  };

  return {
    peek,

    async load(agentId, minVersion) {
      const running = loads.get(agentId);
      if (running && !running.stale) {
        const set = await running.promise;
        if (set === undefined || set.policyVersion >= minVersion) return set;
      }
      const cached = peek(agentId, minVersion);
      if (cached) return cached;
      return startLoad(agentId, minVersion).promise;
    },

    handleChange(event) {
      switch (event.kind) {
        case 'policy.changed': {
          const entry = entries.get(event.agentId);
          // An event about a version already cached (or older) changes nothing.
          if (entry && event.policyVersion <= entry.set.policyVersion) return;
          return invalidate(event.agentId);
        }
        case 'agent.changed':
          return invalidate(event.agentId);
        case 'key.revoked':
          return; // keys are the gateway's business
      }
    },

    get size() {
      return entries.size;
    },

    close() {
      closed = true;
      for (const [timer, set] of retiring) {
        clearTimeout(timer);
        set.release();
      }
      retiring.clear();
      for (const entry of entries.values()) entry.set.release();
      entries.clear();
    },
  };
}
