import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { MemberKeyResolver } from '../modules/identity/member-key-resolver.ts';
import type { MemberContext } from '../modules/identity/member-context.ts';
import type { SessionRegistry } from '../modules/sessions/session-registry.ts';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { buildMcpServer, callerAuthInfo } from './mcp-server.ts';
import type { ToolCallService } from './tool-call-service.ts';
import { createOriginCheck, type McpOriginPolicy } from './origin-guard.ts';

/** JSON-RPC error codes used for protocol faults on `/mcp`. */
export const JSONRPC_PARSE_ERROR = -32700;
export const JSONRPC_INVALID_REQUEST = -32600;
/** Implementation-defined: authentication and authorization faults at the HTTP layer. */
export const JSONRPC_UNAUTHORIZED = -32001;
export const JSONRPC_FORBIDDEN = -32003;
export const JSONRPC_SESSION_NOT_FOUND = -32004;

declare module 'fastify' {
  interface FastifyRequest { mcpContext?: MemberContext }
}

function rpcError(reply: FastifyReply, status: number, code: number, message: string, id: unknown = null) {
  return reply.code(status).type('application/json').send({ jsonrpc: '2.0', error: { code, message }, id });
}

function bearerOf(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  if (!header) return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}

function firstRequest(body: unknown): { method: string; id: unknown; name: string } {
  const message = (Array.isArray(body) ? body[0] : body) as { method?: unknown; id?: unknown; params?: { name?: unknown } } | undefined;
  return {
    method: typeof message?.method === 'string' ? message.method : '',
    id: message?.id ?? null,
    name: typeof message?.params?.name === 'string' ? message.params.name : '',
  };
}

/**
 * `/mcp`: MCP Streamable HTTP for every connector on one endpoint. `Origin` and `Host` are
 * checked first (DNS rebinding, decision 024), then the member key, before anything is parsed;
 * a disabled agent gets 403 (and an audit entry) on every call.
 *
 * Tool sessions live in the shared registry, not in this process: `initialize` records one
 * and answers its id; every later request (on any replica) is checked against the registry
 * and served by a transport and server made for that request alone, so no replica holds
 * session state and no balancer needs to be sticky. An unknown, ended or expired session id,
 * or one presented with another member key, is 404, so the client initializes again.
 * Responses are JSON (no server-initiated messages), so `GET` (a standalone SSE stream) is 405.
 */
export async function mcpRoutes(app: FastifyInstance, options: {
  resolver: MemberKeyResolver;
  toolCalls: ToolCallService;
  sessions: SessionRegistry;
  bodyLimit: number;
  origins: McpOriginPolicy;
}) {
  const originRefusal = createOriginCheck(options.origins);

  // Transports still answering; closed at shutdown (preClose: an open stream would keep the server up).
  const open = new Set<StreamableHTTPServerTransport>();
  app.addHook('preClose', async () => {
    await Promise.all([...open].map((t) => t.close().catch(() => undefined)));
    open.clear();
  });

  // The body is parsed here, not by Fastify, so malformed JSON becomes JSON-RPC -32700.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string', bodyLimit: options.bodyLimit }, (_req, body, done) => done(null, body));

  app.addHook('onRequest', async (request, reply) => {
    const refusal = originRefusal(request.headers);
    if (refusal) return rpcError(reply, 403, JSONRPC_FORBIDDEN, refusal);
    const key = bearerOf(request);
    const context = key ? await options.resolver.resolve(key) : undefined;
    if (!context) {
      reply.header('WWW-Authenticate', 'Bearer realm="portcullis", error="invalid_token"');
      return rpcError(reply, 401, JSONRPC_UNAUTHORIZED, key ? 'Invalid or revoked member key' : 'A member key is required: Authorization: Bearer pcm_…');
    }
    request.mcpContext = context;
  });

  const handle = async (request: FastifyRequest, reply: FastifyReply) => {
    const context = request.mcpContext!;
    let body: unknown;
    if (request.method === 'POST') {
      const text = typeof request.body === 'string' ? request.body : '';
      try {
        body = JSON.parse(text);
      } catch {
        return rpcError(reply, 400, JSONRPC_PARSE_ERROR, 'Parse error: the body is not valid JSON');
      }
      if (body === null || typeof body !== 'object') return rpcError(reply, 400, JSONRPC_INVALID_REQUEST, 'Invalid request: expected a JSON-RPC message or batch');
    }

    if (context.agentStatus === 'disabled') {
      const first = firstRequest(body);
      options.toolCalls.auditRefusedRequest(context, {
        method: first.method || `HTTP ${request.method}`, name: first.name, args: extractArgs(body),
        sessionId: headerOf(request, 'mcp-session-id'), callerIp: request.ip,
      }, 'Agent is disabled');
      return rpcError(reply, 403, JSONRPC_FORBIDDEN, 'This agent is disabled', first.id);
    }

    const sessionId = headerOf(request, 'mcp-session-id');
    if (request.method === 'GET') {
      return reply.code(405).header('allow', 'POST, DELETE').type('application/json')
        .send({ jsonrpc: '2.0', error: { code: JSONRPC_INVALID_REQUEST, message: 'This server sends no server-initiated messages: use POST' }, id: null });
    }
    let transport: StreamableHTTPServerTransport;
    let servingId = sessionId;
    if (sessionId) {
      const session = await options.sessions.findLive(sessionId);
      if (!session || session.keyId !== context.keyId) {
        return rpcError(reply, 404, JSONRPC_SESSION_NOT_FOUND, 'Session not found: initialize a new session');
      }
      if (request.method === 'DELETE') {
        await options.sessions.end(sessionId, 'client');
        return reply.code(200).send();
      }
      options.sessions.touch(sessionId);
      transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    } else {
      const init = request.method === 'POST' ? initializeOf(body) : undefined;
      if (!init) return rpcError(reply, 400, JSONRPC_INVALID_REQUEST, 'Bad request: no valid Mcp-Session-Id; send initialize first');
      const id = randomUUID();
      servingId = id;
      await options.sessions.open({
        id, agentId: context.agentId, memberId: context.memberId, keyId: context.keyId,
        clientName: init.clientName, clientVersion: init.clientVersion, protocolVersion: init.protocolVersion,
      });
      transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => id, enableJsonResponse: true });
    }
    open.add(transport);
    await buildMcpServer(options.toolCalls).connect(transport);

    reply.hijack();
    const raw = request.raw as typeof request.raw & { auth?: AuthInfo };
    raw.auth = callerAuthInfo({ context, callerIp: request.ip, sessionId: servingId });
    try {
      await transport.handleRequest(raw, reply.raw, body as JSONRPCMessage | JSONRPCMessage[] | undefined);
    } catch (err) {
      request.log.error({ err }, 'MCP transport failed');
      if (!reply.raw.headersSent) {
        reply.raw.writeHead(500, { 'content-type': 'application/json' });
        reply.raw.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32603, message: 'Internal error' }, id: null }));
      }
    } finally {
      open.delete(transport);
      void transport.close().catch(() => undefined);
    }
  };

  app.route({ method: ['POST', 'GET', 'DELETE'], url: '/mcp', handler: handle });
}

function headerOf(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** The `initialize` request of a POST body (alone or in a batch): who the client is. */
function initializeOf(body: unknown): { clientName: string; clientVersion: string; protocolVersion: string } | undefined {
  const init = (Array.isArray(body) ? body.find(isInitializeRequest) : isInitializeRequest(body) ? body : undefined) as
    { params: { protocolVersion: string; clientInfo: { name: string; version: string } } } | undefined;
  if (!init) return undefined;
  // Stored in Postgres and shown in the dashboard: control characters (NUL cannot be stored) are dropped.
  const clip = (value: unknown) => (typeof value === 'string' ? value.replace(/[\u0000-\u001F\u007F]/g, '').slice(0, 200) : '');
  return { clientName: clip(init.params.clientInfo?.name), clientVersion: clip(init.params.clientInfo?.version), protocolVersion: clip(init.params.protocolVersion) };
}

function extractArgs(body: unknown): Record<string, unknown> {
  const message = (Array.isArray(body) ? body[0] : body) as { params?: { arguments?: unknown } } | undefined;
  const args = message?.params?.arguments;
  return args && typeof args === 'object' && !Array.isArray(args) ? (args as Record<string, unknown>) : {};
}
