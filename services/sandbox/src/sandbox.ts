import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { getConnector } from '@portcullis/core';
import { sendJson, sendJsonRpcError } from './http/http-io.ts';
import { createMcpEndpoint } from './http/mcp-endpoint.ts';
import { SessionRegistry } from './http/session-registry.ts';
import { handleTokenRequest } from './http/token-endpoint.ts';
import { createSandboxConnectors, type SandboxConnector } from './sandbox-connector.ts';
import { deriveTokenKey, issueSandboxToken } from './sandbox-tokens.ts';
import { seedCollectionsOf, type SandboxEntity } from './store/seed-data.ts';
import type { CallerIdentity } from './tools/tool-executor.ts';

export interface SandboxOptions {
  /** Interface to bind; default 127.0.0.1. */
  host?: string;
  /** Port to bind; 0 (the default) picks a free one. */
  port?: number;
  /** The server secret (`resolveSecret`); the token key is derived from it. */
  secret: string;
}

/** A running sandbox: stand-in upstream MCP servers for every catalog connector. */
export interface Sandbox {
  /** Base URL, e.g. `http://127.0.0.1:9400`. */
  readonly url: string;
  /** The MCP endpoint of one connector: `${url}/${service}/mcp`. */
  upstreamUrl(service: string): string;
  /** A Bearer token of `service` for a member, as the sandbox's OAuth server would issue it. */
  issueToken(service: string, identity: CallerIdentity): string;
  /** The live records of one entity type of a connector (copies), including changes made by tool calls. */
  listEntities(service: string, type: string): SandboxEntity[];
  /** Ends every session and stops listening. */
  close(): Promise<void>;
}

/** Sessions unused this long are closed, so clients that never DELETE do not pile up. */
const SESSION_IDLE_MS = 30 * 60_000;
const SESSION_SWEEP_MS = 60_000;

function requireConnector<T>(items: ReadonlyMap<string, T>, service: string): T {
  const item = items.get(service);
  if (item === undefined) throw new Error(`unknown connector "${service}"`);
  return item;
}

function hostForUrl(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/**
 * Starts the sandbox: one HTTP server (plain `node:http`, to keep the per-request cost of
 * the benchmark's "direct call" baseline low) serving
 *
 * - `/<connector>/mcp` — MCP Streamable HTTP for each of the 16 connectors;
 * - `POST /_sandbox/<connector>/tokens` — tokens for fixtures and seeds in other processes;
 * - `GET /_sandbox/health` — `{status: "ok"}` once listening.
 *
 * Every start begins from the same seed data; tokens verify by signature alone, so they
 * outlive restarts that keep the secret. Never start it in production (see README).
 */
export async function startSandbox(options: SandboxOptions): Promise<Sandbox> {
  const host = options.host ?? '127.0.0.1';
  const tokenKey = deriveTokenKey(options.secret);
  const sandboxes = createSandboxConnectors();
  const sessions = new SessionRegistry();
  const handleMcp = createMcpEndpoint({ tokenKey, sessions, now: Date.now });

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? '/';
    const query = url.indexOf('?');
    const parts = (query < 0 ? url : url.slice(0, query)).split('/');
    // ['', '<connector>', 'mcp'] or ['', '_sandbox', '<connector>', 'tokens'] or ['', '_sandbox', 'health']
    const mcpTarget: SandboxConnector | undefined = parts.length === 3 && parts[2] === 'mcp' ? sandboxes.get(parts[1] ?? '') : undefined;
    if (mcpTarget) return handleMcp(req, res, mcpTarget);
    if (parts[1] === '_sandbox') {
      if (parts.length === 4 && parts[3] === 'tokens' && sandboxes.has(parts[2] ?? '')) return handleTokenRequest(req, res, parts[2] as string, tokenKey);
      if (parts.length === 3 && parts[2] === 'health' && req.method === 'GET') return sendJson(res, 200, { status: 'ok' });
    }
    sendJson(res, 404, { error: 'not_found', error_description: `No sandbox route for ${req.method ?? ''} ${url}` });
  }

  const server = createServer((req, res) => {
    route(req, res).catch((error: unknown) => {
      console.error('sandbox: request failed', error);
      if (!res.headersSent) sendJsonRpcError(res, 500, -32603, 'Internal error');
      else res.destroy();
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${hostForUrl(host)}:${port}`;

  const sweeper = setInterval(() => {
    sessions.closeIdle(Date.now(), SESSION_IDLE_MS).catch((error: unknown) => console.error('sandbox: closing idle sessions failed', error));
  }, SESSION_SWEEP_MS);
  sweeper.unref();

  let closing: Promise<void> | undefined;
  return {
    url,
    upstreamUrl: (service) => `${url}/${service}/mcp`,
    issueToken: (service, identity) => {
      requireConnector(sandboxes, service);
      if (identity.login.length === 0) throw new Error('a sandbox token needs a login');
      return issueSandboxToken(tokenKey, service, identity);
    },
    listEntities: (service, type) => requireConnector(sandboxes, service).store.snapshot(type),
    close: () => {
      closing ??= (async () => {
        clearInterval(sweeper);
        await sessions.closeAll();
        const closed = new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
        server.closeAllConnections();
        await closed;
      })();
      return closing;
    },
  };
}

/**
 * The records of one entity type a freshly started sandbox holds for a connector, e.g.
 * `listEntities('github', 'repositories')` → `acme/api`, `acme/web`, `acme/infra`. The same
 * in every process, so tests and harvesting code can know them without a running sandbox.
 */
export function listEntities(service: string, type: string): SandboxEntity[] {
  const connector = getConnector(service);
  if (!connector) throw new Error(`unknown connector "${service}"`);
  return seedCollectionsOf(connector).get(type) ?? [];
}
