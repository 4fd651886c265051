import { ErrorCode, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { UpstreamEraChanged, UpstreamHttpError, UpstreamSession, UpstreamTimeout } from './upstream-session.ts';

/** Raised when an upstream connector fails; the message is safe to show the caller. */
export class UpstreamError extends Error {
  override readonly name = 'UpstreamError';
  constructor(message: string, readonly kind: 'unauthorized' | 'timeout' | 'unreachable' | 'busy' | 'protocol', options?: { cause?: unknown }) {
    super(message, options);
  }
}

export interface UpstreamTarget { memberId: string; service: string; url: string; accessToken: string }

export interface UpstreamPool {
  /** Calls `tool` on the connector's upstream MCP server with the member's token, returning its result unchanged. */
  callTool(target: UpstreamTarget, tool: string, args: Record<string, unknown>): Promise<CallToolResult>;
  /** Open upstream sessions (for tests and metrics). */
  readonly size: number;
  close(): Promise<void>;
}

export interface UpstreamPoolOptions {
  /** Deadline of one call, including the wait for a free slot and the session's set-up. */
  timeoutMs: number;
  /** Sessions unused this long are closed. */
  idleMs?: number;
  /** Calls in flight at once on one (member, connector) session; more wait their turn. */
  maxConcurrentPerSession?: number;
  /** Sessions kept open at most; the least recently used one is closed to make room. */
  maxSessions?: number;
}

interface PooledSession {
  client: UpstreamSession;
  token: string;
  lastUsed: number;
  active: number;
  waiting: Array<() => void>;
  /** Out of the pool; its client closes once its last call in flight settles. */
  discarded: boolean;
}

function unauthorized(cause: unknown): UpstreamError {
  return new UpstreamError('The connector rejected the member\'s credentials.', 'unauthorized', { cause });
}

/** Maps what the SDK throws to an error whose message the caller may see. */
function classify(err: unknown): UpstreamError {
  if (err instanceof UpstreamError) return err;
  if (err instanceof UpstreamHttpError && err.status === 401) return unauthorized(err);
  if (err instanceof UpstreamTimeout) return new UpstreamError('The connector did not answer in time.', 'timeout', { cause: err });
  if (err instanceof UpstreamHttpError) return new UpstreamError(`The connector failed: it answered HTTP ${err.status}.`, 'protocol', { cause: err });
  const message = err instanceof Error ? err.message : String(err);
  const code = (err as { code?: unknown }).code;
  if (/ECONNREFUSED|ECONNRESET|ENOTFOUND|EAI_AGAIN|UND_ERR_SOCKET|UND_ERR_CONNECT/.test(String(code)) || /fetch failed|socket/i.test(message)) return new UpstreamError('The connector cannot be reached.', 'unreachable', { cause: err });
  return new UpstreamError(`The connector failed: ${message.slice(0, 300)}`, 'protocol', { cause: err });
}

/**
 * The upstream forgot the session (it restarted or expired it), or no longer serves the
 * revision the session speaks: safe to retry on a new one.
 */
function isSessionGone(err: unknown): boolean {
  return (err instanceof UpstreamHttpError && err.status === 404) || err instanceof UpstreamEraChanged;
}

/**
 * One MCP client session per (member, connector), reused across calls: at most
 * `maxConcurrentPerSession` calls in flight on each, at most `maxSessions` sessions (least
 * recently used closed first), idle ones closed after `idleMs`. A session whose token
 * changed is replaced; one the upstream forgot is re-opened once.
 */
export function createUpstreamPool(options: UpstreamPoolOptions): UpstreamPool {
  const sessions = new Map<string, PooledSession>();
  const idleMs = options.idleMs ?? 5 * 60_000;
  const maxConcurrent = options.maxConcurrentPerSession ?? 64;
  const maxSessions = options.maxSessions ?? 1_000;

  /** Takes a session out of the pool. Calls already on it finish on their own (closing it under them would fail them too). */
  function discard(key: string, session: PooledSession): void {
    if (sessions.get(key) === session) sessions.delete(key);
    session.discarded = true;
  }

  const sweep = setInterval(() => {
    const now = Date.now();
    for (const [key, session] of sessions) if (session.active === 0 && now - session.lastUsed > idleMs) discard(key, session);
  }, Math.min(60_000, Math.max(1_000, idleMs / 2)));
  sweep.unref();

  function open(key: string, target: UpstreamTarget): PooledSession {
    if (sessions.size >= maxSessions) {
      // Map order is insertion order and every use re-inserts: the first idle entry is the least recently used.
      for (const [oldKey, old] of sessions) if (old.active === 0) { discard(oldKey, old); break; }
    }
    const client = new UpstreamSession(target.url, target.accessToken, options.timeoutMs);
    client.ready.catch(() => undefined);
    const session: PooledSession = { client, token: target.accessToken, lastUsed: Date.now(), active: 0, waiting: [], discarded: false };
    sessions.set(key, session);
    return session;
  }

  function sessionFor(target: UpstreamTarget): { key: string; session: PooledSession } {
    const key = `${target.memberId}:${target.service}`;
    let session = sessions.get(key);
    if (session && session.token !== target.accessToken) { discard(key, session); session = undefined; }
    if (!session) session = open(key, target);
    else { sessions.delete(key); sessions.set(key, session); }
    session.lastUsed = Date.now();
    return { key, session };
  }

  async function acquire(session: PooledSession, deadline: number): Promise<void> {
    while (session.active >= maxConcurrent) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw new UpstreamError('Too many calls to this connector are in flight for this member; try again shortly.', 'busy');
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, remaining);
        session.waiting.push(() => { clearTimeout(timer); resolve(); });
      });
    }
    session.active += 1;
  }

  function release(session: PooledSession): void {
    session.active -= 1;
    session.lastUsed = Date.now();
    session.waiting.shift()?.();
  }

  async function callOnce(target: UpstreamTarget, tool: string, args: Record<string, unknown>, deadline: number): Promise<CallToolResult> {
    const { key, session } = sessionFor(target);
    await acquire(session, deadline);
    try {
      // A session whose set-up failed is never reused, whatever the failure was.
      await session.client.ready.catch((err: unknown) => { discard(key, session); throw err; });
      return await session.client.callTool(tool, args, deadline);
    } catch (err) {
      // A broken session is not reused: the next call opens a new one. A JSON-RPC error the
      // upstream answered (bad arguments, a failing tool) leaves the session as it was.
      const answered = err instanceof McpError && err.code !== ErrorCode.RequestTimeout && err.code !== ErrorCode.ConnectionClosed;
      if (!answered) discard(key, session);
      throw err;
    } finally {
      release(session);
    }
  }

  return {
    async callTool(target, tool, args) {
      const deadline = Date.now() + options.timeoutMs;
      try {
        return await callOnce(target, tool, args, deadline);
      } catch (err) {
        if (!isSessionGone(err)) throw classify(err);
        try {
          return await callOnce(target, tool, args, deadline);
        } catch (retryErr) {
          throw classify(retryErr);
        }
      }
    },
    get size() { return sessions.size; },
    async close() {
      clearInterval(sweep);
      sessions.clear();
    },
  };
}
