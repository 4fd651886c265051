import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isJsonContentType } from '@modelcontextprotocol/sdk/shared/mediaType.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { authInfoOf, createConnectorMcpServer } from '../mcp-server.ts';
import type { SandboxConnector } from '../sandbox-connector.ts';
import { authenticateBearer, sendBearerChallenge } from '../oauth/bearer-authentication.ts';
import type { OAuthAuthority } from '../oauth/oauth-authority.ts';
import { MAX_MCP_BODY_BYTES, parseJson, readBody, sendJsonRpcError } from './http-io.ts';
import type { McpSession, SessionRegistry } from './session-registry.ts';

/** What the endpoint needs: the OAuth authority (it checks tokens), the session registry, a clock, and where the resource metadata is. */
export interface McpEndpointDeps {
  authority: OAuthAuthority;
  sessions: SessionRegistry;
  now: () => number;
  /** The RFC 9728 metadata URL of a connector's MCP endpoint, as this request reached it. */
  resourceMetadataUrlOf: (req: IncomingMessage, connectorKey: string) => string;
}

/** Handles one request to `/<connector>/mcp`. */
export type McpRequestHandler = (req: IncomingMessage, res: ServerResponse, sandbox: SandboxConnector) => Promise<void>;

type ParsedBody = { ok: true; body: unknown } | { ok: false };

/** Reads a JSON POST body, answering 413 or 400 itself when it cannot. Other bodies are left to the transport. */
async function readJsonRpcBody(req: IncomingMessage, res: ServerResponse): Promise<ParsedBody> {
  if (req.method !== 'POST' || !isJsonContentType(req.headers['content-type'])) return { ok: true, body: undefined };
  const read = await readBody(req, MAX_MCP_BODY_BYTES);
  if (read.kind === 'too_large') {
    sendJsonRpcError(res, 413, -32000, `Payload Too Large: Request body must not exceed ${MAX_MCP_BODY_BYTES} bytes`, { connection: 'close' });
    return { ok: false };
  }
  const parsed = parseJson(read.text);
  if (!parsed) {
    sendJsonRpcError(res, 400, -32700, 'Parse error: Invalid JSON');
    return { ok: false };
  }
  return { ok: true, body: parsed.value };
}

/**
 * The Streamable HTTP endpoint of the sandbox connectors. Every request needs a live token
 * of this connector (else 401 with `WWW-Authenticate: Bearer …, resource_metadata="…"`); an `initialize` POST without a
 * session id opens a session (JSON responses, the fastest mode measured); any other request
 * needs the session id (400 without it) of a live session of the same connector and member
 * (404 otherwise). The SDK transport does the rest, including GET streams and DELETE.
 */
export function createMcpEndpoint(deps: McpEndpointDeps): McpRequestHandler {
  const { authority, sessions, now } = deps;

  async function openSession(sandbox: SandboxConnector, login: string): Promise<{ server: McpSession['server']; transport: StreamableHTTPServerTransport }> {
    const server = createConnectorMcpServer(sandbox);
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableJsonResponse: true,
      onsessioninitialized: (id) => sessions.add({ id, connectorKey: sandbox.connector.key, login, server, transport, lastSeenAt: now() }),
    });
    transport.onclose = () => {
      if (transport.sessionId !== undefined) sessions.delete(transport.sessionId);
    };
    await server.connect(transport);
    return { server, transport };
  }

  return async (req, res, sandbox) => {
    const method = req.method ?? '';
    if (method !== 'POST' && method !== 'GET' && method !== 'DELETE') {
      sendJsonRpcError(res, 405, -32000, 'Method not allowed.', { allow: 'GET, POST, DELETE' });
      return;
    }
    const auth = authenticateBearer(req, authority, sandbox.connector.key);
    if (!auth.ok) {
      sendBearerChallenge(res, auth.problem, deps.resourceMetadataUrlOf(req, sandbox.connector.key));
      return;
    }
    const parsed = await readJsonRpcBody(req, res);
    if (!parsed.ok) return;
    (req as IncomingMessage & { auth?: AuthInfo }).auth = authInfoOf(auth.token, sandbox.connector.key, auth.claims);

    const sessionId = req.headers['mcp-session-id'];
    if (typeof sessionId === 'string') {
      const session = sessions.get(sessionId);
      if (!session || session.connectorKey !== sandbox.connector.key || session.login !== auth.claims.login) {
        sendJsonRpcError(res, 404, -32001, 'Session not found');
        return;
      }
      session.lastSeenAt = now();
      await session.transport.handleRequest(req, res, parsed.body);
      return;
    }

    if (method === 'POST' && parsed.body === undefined) {
      sendJsonRpcError(res, 415, -32000, 'Unsupported Media Type: Content-Type must be application/json');
      return;
    }
    if (method !== 'POST' || !isInitializeRequest(parsed.body)) {
      sendJsonRpcError(res, 400, -32000, 'Bad Request: Mcp-Session-Id header is required');
      return;
    }
    const { server, transport } = await openSession(sandbox, auth.claims.login);
    await transport.handleRequest(req, res, parsed.body);
    // The transport refused the initialize (e.g. a wrong Accept header): nothing to keep.
    if (transport.sessionId === undefined) await server.close();
  };
}
