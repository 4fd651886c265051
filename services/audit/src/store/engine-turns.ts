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
 * Engine time (ms) a tenant that starts waiting may use ahead of one that keeps the engine busy:
 * an audit page with its count and open-call check takes 10-30 ms of engine time here.
 */
const DEFAULT_CREDIT_MS = 50;

/**
 * Turns on the embedded engine, one at a time, shared fairly between tenants by the engine time
 * they use (start-time fair queueing): each tenant's work waits in a queue of its own, and a
 * finished turn passes to the waiting tenant that has used the engine least. A tenant that
 * starts waiting counts from the current turn's count less `creditMs` (as a scheduler places a
 * task that wakes up a little behind the others): a tenant that was idle gets a short burst of
 * turns ahead of one that keeps the engine busy, enough for one request's few statements, and no
 * more, however long it was idle. So a tenant that keeps the engine busy with many or long
 * queries delays another tenant's request by the turn that is running, not by its own that wait.
 */
export function createFairTurns(o: { now?: () => number; creditMs?: number } = {}) {
  const now = o.now ?? (() => performance.now());
  const credit = o.creditMs ?? DEFAULT_CREDIT_MS;
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
      // A tenant that starts waiting counts from just behind the clock: it cannot bank more idle time than that.
      if (!queues.has(tenant)) used.set(tenant, Math.max(used.get(tenant) ?? -Infinity, clock - credit));
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
            // Counts at or behind where a fresh start begins say nothing more: forget them.
            for (const [name, count] of used) if (count <= clock - credit && !queues.has(name) && name !== tenant) used.delete(name);
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
