import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { getConnector } from '@portcullis/core';
import { sendJson, sendJsonRpcError } from './http/http-io.ts';
import { problemsOf } from './http/json-request.ts';
import { createMcpEndpoint } from './http/mcp-endpoint.ts';
import { appRegistrationSchema, handleSandboxControl, registerOwnerApp, SANDBOX_CONTROLS, type SandboxControl } from './http/sandbox-controls.ts';
import { SessionRegistry } from './http/session-registry.ts';
import { handleTokenRequest, loginSchema } from './http/token-endpoint.ts';
import { OAuthAuthority } from './oauth/oauth-authority.ts';
import { deriveOAuthKeys } from './oauth/oauth-keys.ts';
import { handleMetadata, oauthEndpointOf, type MetadataKind } from './oauth/oauth-routes.ts';
import { oauthUrlsOf, publicBaseUrlOf } from './oauth/oauth-urls.ts';
import { createSandboxConnectors, type SandboxConnector } from './sandbox-connector.ts';
import { deriveTokenKey, issueSandboxToken } from './sandbox-tokens.ts';
import { seedCollectionsOf, type SandboxEntity } from './store/seed-data.ts';
import type { CallerIdentity } from './tools/tool-executor.ts';

export interface SandboxOptions {
  /** Interface to bind; default 127.0.0.1. */
  host?: string;
  /** Port to bind; 0 (the default) picks a free one. */
  port?: number;
  /** The server secret (`resolveSecret`); the token and OAuth keys are derived from it. */
  secret: string;
  /** Lifetime of the access tokens the OAuth server issues, in seconds; default 3600. */
  accessTokenTtlSeconds?: number;
}

/** An owner's OAuth app at a connector, as `registerApp` creates it. */
export interface SandboxApp {
  clientId: string;
  clientSecret: string;
}

/** A running sandbox: stand-in upstream MCP servers for every catalog connector. */
export interface Sandbox {
  /** Base URL, e.g. `http://127.0.0.1:9400`. */
  readonly url: string;
  /** The MCP endpoint of one connector: `${url}/${service}/mcp`. */
  upstreamUrl(service: string): string;
  /** A Bearer token of `service` for a member without the OAuth flow; it never expires and belongs to no grant. */
  issueToken(service: string, identity: CallerIdentity): string;
  /**
   * Creates an owner's "OAuth app" at `service`, as on the provider's developer site: a
   * confidential client (`client_secret_basic` or `_post`) with these exact redirect URIs.
   * The only kind of client `own_app` connectors have. Throws on a bad URI or name.
   */
  registerApp(service: string, redirectUris: string[], name?: string): SandboxApp;
  /** The member removed the app at the provider: every grant of `login` at `service` so far stops working (refresh and access tokens). */
  revokeGrants(service: string, login: string): void;
  /** Every OAuth access token of `login` at `service` issued so far counts as expired; refresh tokens keep working. */
  expireAccessTokens(service: string, login: string): void;
  /** The live records of one entity type of a connector (copies), including changes made by tool calls. */
  listEntities(service: string, type: string): SandboxEntity[];
  /** Ends every session and stops listening. */
  close(): Promise<void>;
}

const DEFAULT_ACCESS_TOKEN_TTL_SECONDS = 3600;

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

function requireLogin(login: string): string {
  const parsed = loginSchema.safeParse(login);
  if (!parsed.success) throw new Error(`invalid login: ${problemsOf(parsed.error)}`);
  return parsed.data;
}

/** The path of a request URL split at `/`, without the query: `/github/mcp?x` → `['', 'github', 'mcp']`. */
function pathPartsOf(url: string): string[] {
  const query = url.indexOf('?');
  return (query < 0 ? url : url.slice(0, query)).split('/');
}

/**
 * Starts the sandbox: one HTTP server (plain `node:http`, to keep the per-request cost of
 * the benchmark's "direct call" baseline low) serving
 *
 * - `/<connector>/mcp` — MCP Streamable HTTP for each of the 16 connectors;
 * - `/<connector>/oauth/{authorize,token,register,revoke,userinfo}` and
 *   `/.well-known/oauth-{protected-resource/<connector>/mcp,authorization-server/<connector>}`
 *   — an OAuth 2.1 authorization server per connector (`oauth/`);
 * - `POST /_sandbox/<connector>/tokens` — tokens for fixtures and seeds in other processes;
 * - `POST /_sandbox/<connector>/{apps,revoke-grants,expire-tokens}` — OAuth test controls;
 * - `GET /_sandbox/health` — `{status: "ok"}` once listening.
 *
 * Every start begins from the same seed data; tokens, refresh tokens and OAuth clients verify
 * by signature alone, so they outlive restarts that keep the secret. Never start it in
 * production (see README).
 */
export async function startSandbox(options: SandboxOptions): Promise<Sandbox> {
  const host = options.host ?? '127.0.0.1';
  const accessTokenTtlSeconds = options.accessTokenTtlSeconds ?? DEFAULT_ACCESS_TOKEN_TTL_SECONDS;
  if (!Number.isInteger(accessTokenTtlSeconds) || accessTokenTtlSeconds < 1) throw new Error('accessTokenTtlSeconds must be a positive whole number');
  const tokenKey = deriveTokenKey(options.secret);
  const authority = new OAuthAuthority({ tokenKey, keys: deriveOAuthKeys(options.secret), accessTokenTtlSeconds, now: Date.now });
  const sandboxes = createSandboxConnectors();
  const sessions = new SessionRegistry();
  // Set once listening; requests only arrive after that.
  let url = '';
  const baseOf = (req: IncomingMessage): string => publicBaseUrlOf(req, url);
  const handleMcp = createMcpEndpoint({ authority, sessions, now: Date.now, resourceMetadataUrlOf: (req, key) => oauthUrlsOf(baseOf(req), key).resourceMetadata });

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const parts = pathPartsOf(req.url ?? '/');
    const [, first = '', second = '', third = '', fourth = ''] = parts;
    // ['', '<connector>', 'mcp'] · ['', '<connector>', 'oauth', '<endpoint>']
    const target: SandboxConnector | undefined = sandboxes.get(first);
    if (target && parts.length === 3 && second === 'mcp') return handleMcp(req, res, target);
    if (target && parts.length === 4 && second === 'oauth') {
      const context = { authority, connector: target.connector, base: baseOf(req) };
      const endpoint = oauthEndpointOf(context, third);
      if (endpoint) return endpoint(req, res, context);
    }
    // ['', '.well-known', 'oauth-protected-resource', '<connector>', 'mcp'] · ['', '.well-known', 'oauth-authorization-server', '<connector>']
    if (first === '.well-known') {
      const described = sandboxes.get(third)?.connector;
      const kind: MetadataKind | undefined =
        second === 'oauth-protected-resource' && parts.length === 5 && fourth === 'mcp' ? second : second === 'oauth-authorization-server' && parts.length === 4 ? second : undefined;
      if (described && kind) return handleMetadata(req, res, kind, { connector: described, base: baseOf(req) });
    }
    // ['', '_sandbox', '<connector>', 'tokens' | control] · ['', '_sandbox', 'health']
    if (first === '_sandbox') {
      if (parts.length === 4 && sandboxes.has(second)) {
        if (third === 'tokens') return handleTokenRequest(req, res, second, tokenKey);
        if ((SANDBOX_CONTROLS as readonly string[]).includes(third)) return handleSandboxControl(req, res, third as SandboxControl, second, authority);
      }
      if (parts.length === 3 && second === 'health' && req.method === 'GET') return sendJson(res, 200, { status: 'ok' });
    }
    sendJson(res, 404, { error: 'not_found', error_description: `No sandbox route for ${req.method ?? ''} ${req.url ?? '/'}` });
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
  url = `http://${hostForUrl(host)}:${port}`;

  const sweeper = setInterval(() => {
    authority.prune();
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
    registerApp: (service, redirectUris, name) => {
      requireConnector(sandboxes, service);
      const app = appRegistrationSchema.safeParse({ redirect_uris: redirectUris, ...(name !== undefined ? { name } : {}) });
      if (!app.success) throw new Error(`invalid app: ${problemsOf(app.error)}`);
      return registerOwnerApp(authority, service, app.data);
    },
    revokeGrants: (service, login) => {
      requireConnector(sandboxes, service);
      authority.revokeGrantsOf(service, requireLogin(login));
    },
    expireAccessTokens: (service, login) => {
      requireConnector(sandboxes, service);
      authority.expireAccessTokensOf(service, requireLogin(login));
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
