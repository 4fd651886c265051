import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * Whose work the embedded engine is doing: the tenant a gRPC handler serves (decision 069),
 * set around each call with `forTenant` and read wherever the call reaches the engine.
 */
const tenantOfWork = new AsyncLocalStorage<string>();

/** Runs `work` on behalf of `tenant`; engine turns it takes are queued under that name. */
export function forTenant<T>(tenant: string, work: () => T): T {
  return tenantOfWork.run(tenant, work);
}

/**
 * The tenant of an audit request: the agents it may read (`filter.agent_ids`, `agent_ids` or
 * `agent_id`, as the gateway scopes every request to its caller), so one user's requests
 * share a queue and another user's have their own.
 */
export function tenantOfRequest(request: unknown): string {
  const r = (request ?? {}) as { agentId?: unknown; agentIds?: unknown; filter?: { agentIds?: unknown } };
  const ids = Array.isArray(r.filter?.agentIds) ? r.filter.agentIds : Array.isArray(r.agentIds) ? r.agentIds : typeof r.agentId === 'string' && r.agentId ? [r.agentId] : [];
  return [...(ids as string[])].sort().join(',');
}

/**
 * Turns on the embedded engine, one at a time, shared fairly between tenants by the engine time
 * they use (start-time fair queueing): each tenant's work waits in a queue of its own, and a
 * finished turn passes to the waiting tenant that has used the engine least. A tenant's count
 * starts at the current turn's when it starts waiting, so no tenant banks idle time. A tenant
 * that keeps the engine busy with many or long queries then delays another tenant's query by
 * at most the turn that is running, not by all of its own that are waiting.
 */
export function createFairTurns(o: { now?: () => number } = {}) {
  const now = o.now ?? (() => performance.now());
  const queues = new Map<string, Array<() => void>>();
  /** Engine time each tenant with work waiting or running has used, on one virtual clock. */
  const used = new Map<string, number>();
  /** The virtual clock: the count of the tenant whose turn started last. */
  let clock = 0;
  let busy = false;

  function next() {
    let pick: string | undefined;
    for (const tenant of queues.keys()) {
      if (pick === undefined || used.get(tenant)! < used.get(pick)!) pick = tenant;
    }
    if (pick === undefined) {
      busy = false;
      return;
    }
    const queue = queues.get(pick)!;
    const start = queue.shift()!;
    if (queue.length === 0) queues.delete(pick);
    start();
  }

  return {
    /** Runs `work` once it is this tenant's turn (the tenant set by `forTenant`, else one shared name). */
    run<T>(work: () => Promise<T>): Promise<T> {
      const tenant = tenantOfWork.getStore() ?? '';
      // A tenant that starts waiting counts from the clock: it cannot bank the time it was idle.
      if (!queues.has(tenant)) used.set(tenant, Math.max(used.get(tenant) ?? 0, clock));
      return new Promise<T>((resolve, reject) => {
        const start = () => {
          clock = Math.max(clock, used.get(tenant)!);
          const startedAt = now();
          let settled: Promise<T>;
          try {
            settled = work();
          } catch (err) {
            settled = Promise.reject(err);
          }
          settled.then(resolve, reject).finally(() => {
            used.set(tenant, used.get(tenant)! + (now() - startedAt));
            // Counts at or behind the clock say nothing a fresh start would not: forget them.
            for (const [name, count] of used) if (count <= clock && !queues.has(name) && name !== tenant) used.delete(name);
            next();
          });
        };
        if (!busy) {
          busy = true;
          start();
          return;
        }
        const queue = queues.get(tenant);
        if (queue) queue.push(start);
        else queues.set(tenant, [start]);
      });
    },
  };
}
