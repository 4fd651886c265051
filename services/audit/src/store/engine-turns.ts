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
 * Turns on the embedded engine, one at a time, shared fairly between tenants: each tenant's
 * work waits in a queue of its own, and a finished turn passes to the next tenant in turn
 * that has work waiting. A tenant that sends many queries at once then delays another
 * tenant's query by at most one of its own, not by all of them.
 */
export function createFairTurns() {
  const queues = new Map<string, Array<() => void>>();
  let busy = false;

  function next() {
    const first = queues.entries().next();
    if (first.done) {
      busy = false;
      return;
    }
    const [tenant, queue] = first.value;
    const start = queue.shift()!;
    // The tenant goes to the back of the turn order, with whatever it still has waiting.
    queues.delete(tenant);
    if (queue.length > 0) queues.set(tenant, queue);
    start();
  }

  return {
    /** Runs `work` once it is this tenant's turn (the tenant set by `forTenant`, else one shared queue). */
    run<T>(work: () => Promise<T>): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        const start = () => {
          let settled: Promise<T>;
          try {
            settled = work();
          } catch (err) {
            settled = Promise.reject(err);
          }
          settled.then(resolve, reject).finally(next);
        };
        if (!busy) {
          busy = true;
          start();
          return;
        }
        const tenant = tenantOfWork.getStore() ?? '';
        const queue = queues.get(tenant);
        if (queue) queue.push(start);
        else queues.set(tenant, [start]);
      });
    },
  };
}
