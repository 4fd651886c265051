import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { isolatingFetch } from '@portcullis/core';

/** Raised when an upstream connector fails; the message is safe to show the caller. */
export class UpstreamError extends Error {
  override readonly name = 'UpstreamError';
  constructor(message: string, readonly kind: 'unauthorized' | 'timeout' | 'unreachable' | 'protocol', options?: { cause?: unknown }) {
    super(message, options);
  }
}

export interface UpstreamPool {
  /** Calls `tool` on the connector's upstream MCP server with the member's token, returning its result unchanged. */
  callTool(target: { memberId: string; service: string; url: string; accessToken: string }, tool: string, args: Record<string, unknown>): Promise<CallToolResult>;
  close(): Promise<void>;
}

interface PooledClient { client: Client; token: string; lastUsed: number; ready: Promise<void> }

/**
 * One MCP client session per (member, connector), reused across calls and closed when idle.
 */
export function createUpstreamPool(options: { timeoutMs: number; idleMs?: number }): UpstreamPool {
  const pool = new Map<string, PooledClient>();
  const idleMs = options.idleMs ?? 5 * 60_000;

  const sweep = setInterval(() => {
    const now = Date.now();
    for (const [key, pooled] of pool) {
      if (now - pooled.lastUsed > idleMs) { pool.delete(key); void pooled.client.close().catch(() => undefined); }
    }
  }, 60_000);
  sweep.unref();

  function connect(url: string, token: string): PooledClient {
    const client = new Client({ name: 'portcullis-gateway', version: '0.1.0' });
    const transport = new StreamableHTTPClientTransport(new URL(url), {
      fetch: isolatingFetch,
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    });
    const ready = client.connect(transport, { timeout: options.timeoutMs });
    return { client, token, lastUsed: Date.now(), ready };
  }

  function classify(err: unknown): UpstreamError {
    const message = err instanceof Error ? err.message : String(err);
    if (/\b401\b|unauthori[sz]ed/i.test(message)) return new UpstreamError('The connector rejected the member\'s credentials; reconnect the service.', 'unauthorized', { cause: err });
    if (/timed? ?out|timeout/i.test(message)) return new UpstreamError('The connector did not answer in time.', 'timeout', { cause: err });
    if (/ECONNREFUSED|fetch failed|ENOTFOUND|EAI_AGAIN|socket/i.test(message)) return new UpstreamError('The connector cannot be reached.', 'unreachable', { cause: err });
    return new UpstreamError(`The connector failed: ${message.slice(0, 300)}`, 'protocol', { cause: err });
  }

  return {
    async callTool(target, tool, args) {
      const key = `${target.memberId}:${target.service}`;
      let pooled = pool.get(key);
      if (!pooled || pooled.token !== target.accessToken) {
        if (pooled) void pooled.client.close().catch(() => undefined);
        pooled = connect(target.url, target.accessToken);
        pool.set(key, pooled);
      }
      pooled.lastUsed = Date.now();
      try {
        await pooled.ready;
        return (await pooled.client.request(
          { method: 'tools/call', params: { name: tool, arguments: args } },
          CallToolResultSchema,
          { timeout: options.timeoutMs },
        )) as CallToolResult;
      } catch (err) {
        // A broken session is not reused: the next call reconnects.
        if (pool.get(key) === pooled) pool.delete(key);
        void pooled.client.close().catch(() => undefined);
        throw classify(err);
      }
    },
    async close() {
      clearInterval(sweep);
      await Promise.all([...pool.values()].map((p) => p.client.close().catch(() => undefined)));
      pool.clear();
    },
  };
}
