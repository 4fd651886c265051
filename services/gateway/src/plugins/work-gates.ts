import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '@portcullis/core';

/** How much of one kind of heavy work (audit reads, exports, simulations) may run at once, in this replica. */
export interface WorkGateLimits {
  /** At once, across every user. */
  slots: number;
  /** At once, per user. */
  perUser: number;
  /** At once, per agent the work names (work over several agents counts for the user only). */
  perAgent: number;
  /** Requests of one user waiting for a turn; one more is refused with 429 at once. */
  queuePerUser: number;
  /** Longest a request waits for its turn; then it is refused with 429. */
  maxWaitMs: number;
}

/** Who a piece of work is for, and the agent it reads, if it names one. */
export interface WorkOwner { userId: string; agentId?: string | undefined }

interface Waiter { owner: WorkOwner; start: () => void; timer: NodeJS.Timeout }

/**
 * Turns for one kind of heavy work, shared fairly between users (issue 29, decision 069). At
 * most `slots` run at once, at most `perUser` of one user and `perAgent` over one agent; the
 * rest wait in a queue per user, and a freed slot goes to the next user in turn whose first
 * waiting request may run, so one user's many requests wait behind each other, never in front
 * of another user's. A user's queue is bounded and so is a wait: beyond either, 429
 * `rate_limited` with Retry-After. Counted in this replica's memory: N replicas allow N times
 * the slots (each replica's event loop and the engine behind it are what they protect).
 */
export function createWorkGate(what: string, limits: WorkGateLimits) {
  let running = 0;
  const runningByUser = new Map<string, number>();
  const runningByAgent = new Map<string, number>();
  /** Waiting requests per user, in arrival order; the map's order is the turn order. */
  const queues = new Map<string, Waiter[]>();

  const bump = (map: Map<string, number>, key: string | undefined, by: number) => {
    if (key === undefined) return;
    const n = (map.get(key) ?? 0) + by;
    if (n === 0) map.delete(key);
    else map.set(key, n);
  };
  const mayRun = (owner: WorkOwner) => running < limits.slots
    && (runningByUser.get(owner.userId) ?? 0) < limits.perUser
    && (owner.agentId === undefined || (runningByAgent.get(owner.agentId) ?? 0) < limits.perAgent);
  const take = (owner: WorkOwner) => {
    running += 1;
    bump(runningByUser, owner.userId, 1);
    bump(runningByAgent, owner.agentId, 1);
  };

  /** Gives freed slots to waiting requests, one user's turn after another's. */
  function admit() {
    let admitted = true;
    while (admitted && running < limits.slots) {
      admitted = false;
      for (const [userId, queue] of queues) {
        // The user's oldest request that may run (one over a busy agent does not hold up the rest).
        const at = queue.findIndex((w) => mayRun(w.owner));
        if (at < 0) continue;
        const next = queue.splice(at, 1)[0]!;
        queues.delete(userId);
        // A user who still waits goes to the back of the turn order.
        if (queue.length > 0) queues.set(userId, queue);
        clearTimeout(next.timer);
        take(next.owner);
        next.start();
        admitted = true;
        break;
      }
    }
  }

  const refusal = (why: string) => new ApiError('rate_limited', `Too many ${what} at once ${why}; try again shortly (see Retry-After).`, { retryAfterSeconds: 1 });

  /**
   * Waits for a turn and answers the function that gives it back (call it exactly once, when
   * the work is done, also on failure). Throws 429 `rate_limited` when the user's queue is full
   * or the wait runs out, and stops waiting (without a turn) when `abandoned` fires first.
   */
  async function acquire(owner: WorkOwner, abandoned?: AbortSignal): Promise<() => void> {
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      running -= 1;
      bump(runningByUser, owner.userId, -1);
      bump(runningByAgent, owner.agentId, -1);
      admit();
    };
    // Whatever waits now is held by a limit (every freed turn is handed on at once), so a
    // request that may run takes its turn without queueing behind them.
    if (mayRun(owner)) {
      take(owner);
      return release;
    }
    const queue = queues.get(owner.userId) ?? [];
    if (queue.length >= limits.queuePerUser) throw refusal('for this user');
    return new Promise<() => void>((resolve, reject) => {
      const leave = (err: ApiError) => {
        const at = queue.indexOf(waiter);
        if (at >= 0) queue.splice(at, 1);
        if (queue.length === 0 && queues.get(owner.userId) === queue) queues.delete(owner.userId);
        abandoned?.removeEventListener('abort', onAbort);
        reject(err);
      };
      const onAbort = () => leave(refusal('(the request went away while it waited)'));
      const waiter: Waiter = {
        owner,
        start: () => { abandoned?.removeEventListener('abort', onAbort); resolve(release); },
        timer: setTimeout(() => leave(refusal('on this server')), limits.maxWaitMs),
      };
      abandoned?.addEventListener('abort', onAbort, { once: true });
      queue.push(waiter);
      queues.set(owner.userId, queue);
      admit();
    });
  }

  return {
    acquire,
    /**
     * A preHandler that holds a turn for the whole response (a streamed export included) and
     * gives it back when the response ends or the client goes away. Over a limit: 429 with
     * Retry-After.
     */
    hook(ownerOf: (request: FastifyRequest) => WorkOwner) {
      return async (request: FastifyRequest, reply: FastifyReply) => {
        // The response closes before it is sent only when the client went away.
        const gone = new AbortController();
        const onClose = () => gone.abort();
        reply.raw.once('close', onClose);
        try {
          const release = await acquire(ownerOf(request), gone.signal);
          reply.raw.once('close', release);
          if (reply.raw.destroyed) release();
        } catch (err) {
          if (err instanceof ApiError) reply.header('retry-after', '1');
          throw err;
        } finally {
          reply.raw.removeListener('close', onClose);
        }
      };
    },
    /** Work running and waiting now (for tests and metrics). */
    get load() { return { running, waiting: [...queues.values()].reduce((n, q) => n + q.length, 0) }; },
  };
}

export type WorkGate = ReturnType<typeof createWorkGate>;

/** The kinds of heavy work a tenant can start from the API, each with its own turns. */
export interface WorkGates {
  /** Audit pages, histograms, member lists, dashboard counters and overviews, shadow results. */
  reads: WorkGate;
  /** CSV and NDJSON exports, for as long as they stream. */
  exports: WorkGate;
  /** Policy simulations (a replay of recent traffic). */
  simulations: WorkGate;
}
