import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, ErrorCode, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { isolatingFetch } from '@portcullis/core';

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
  client: Client;
  token: string;
  lastUsed: number;
  ready: Promise<void>;
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
  if (err instanceof StreamableHTTPError && err.code === 401) return unauthorized(err);
  if (err instanceof McpError && err.code === ErrorCode.RequestTimeout) return new UpstreamError('The connector did not answer in time.', 'timeout', { cause: err });
  const message = err instanceof Error ? err.message : String(err);
  if (/ECONNREFUSED|ECONNRESET|fetch failed|ENOTFOUND|EAI_AGAIN|socket/i.test(message)) return new UpstreamError('The connector cannot be reached.', 'unreachable', { cause: err });
  return new UpstreamError(`The connector failed: ${message.slice(0, 300)}`, 'protocol', { cause: err });
}

/** The upstream forgot the session (it restarted or expired it): safe to retry on a new one. */
function isSessionGone(err: unknown): boolean {
  return err instanceof StreamableHTTPError && err.code === 404;
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
  const maxConcurrent = options.maxConcurrentPerSession ?? 8;
  const maxSessions = options.maxSessions ?? 1_000;

  /** Takes a session out of the pool. Calls already on it finish on their own (closing it under them would fail them too). */
  function discard(key: string, session: PooledSession): void {
    if (sessions.get(key) === session) sessions.delete(key);
    session.discarded = true;
    if (session.active === 0) void session.client.close().catch(() => undefined);
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
    const client = new Client({ name: 'portcullis-gateway', version: '0.1.0' });
    const transport = new StreamableHTTPClientTransport(new URL(target.url), {
      fetch: isolatingFetch,
      requestInit: { headers: { Authorization: `Bearer ${target.accessToken}` } },
    });
    const session: PooledSession = { client, token: target.accessToken, lastUsed: Date.now(), ready: client.connect(transport, { timeout: options.timeoutMs }), active: 0, waiting: [], discarded: false };
    session.ready.catch(() => undefined);
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
    if (session.discarded && session.active === 0 && session.waiting.length === 0) void session.client.close().catch(() => undefined);
  }

  async function callOnce(target: UpstreamTarget, tool: string, args: Record<string, unknown>, deadline: number): Promise<CallToolResult> {
    const { key, session } = sessionFor(target);
    await acquire(session, deadline);
    try {
      await session.ready;
      return (await session.client.request(
        { method: 'tools/call', params: { name: tool, arguments: args } },
        CallToolResultSchema,
        { timeout: Math.max(1, deadline - Date.now()) },
      )) as CallToolResult;
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
      const open = [...sessions.values()];
      sessions.clear();
      await Promise.all(open.map((session) => session.client.close().catch(() => undefined)));
    },
  };
}
