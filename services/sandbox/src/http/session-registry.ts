import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';

/**
 * One MCP session: created by an `initialize` request, bound to the connector and to the
 * member whose token opened it (MCP asks servers to bind session ids to the user), ended
 * by DELETE, by idling too long, or by the sandbox closing.
 */
export interface McpSession {
  readonly id: string;
  readonly connectorKey: string;
  readonly login: string;
  readonly server: Server;
  readonly transport: StreamableHTTPServerTransport;
  lastSeenAt: number;
}

/** The live sessions of a sandbox, by session id. */
export class SessionRegistry {
  readonly #sessions = new Map<string, McpSession>();

  get size(): number {
    return this.#sessions.size;
  }

  get(id: string): McpSession | undefined {
    return this.#sessions.get(id);
  }

  add(session: McpSession): void {
    this.#sessions.set(session.id, session);
  }

  delete(id: string): void {
    this.#sessions.delete(id);
  }

  /** Closes sessions unused for more than `idleMs`; returns how many. */
  async closeIdle(now: number, idleMs: number): Promise<number> {
    const idle = [...this.#sessions.values()].filter((session) => now - session.lastSeenAt > idleMs);
    await Promise.all(idle.map((session) => this.#close(session)));
    return idle.length;
  }

  /** Closes every session, e.g. when the sandbox stops. */
  async closeAll(): Promise<void> {
    await Promise.all([...this.#sessions.values()].map((session) => this.#close(session)));
  }

  async #close(session: McpSession): Promise<void> {
    this.#sessions.delete(session.id);
    // Closing the server closes its transport; answers still pending are dropped.
    await session.server.close();
  }
}
