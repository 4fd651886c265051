import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { MemberKeyResolver } from '../modules/identity/member-key-resolver.ts';
import type { MemberContext } from '../modules/identity/member-context.ts';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { buildMcpServer, callerAuthInfo } from './mcp-server.ts';
import type { ToolCallService } from './tool-call-service.ts';

/** JSON-RPC error codes used for protocol faults on `/mcp`. */
export const JSONRPC_PARSE_ERROR = -32700;
export const JSONRPC_INVALID_REQUEST = -32600;
/** Implementation-defined: authentication and authorization faults at the HTTP layer. */
export const JSONRPC_UNAUTHORIZED = -32001;
export const JSONRPC_FORBIDDEN = -32003;
export const JSONRPC_SESSION_NOT_FOUND = -32004;

interface ToolSession {
  transport: StreamableHTTPServerTransport;
  keyId: string;
  lastSeen: number;
}

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
 * `/mcp`: MCP Streamable HTTP for every connector on one endpoint. The member key is checked
 * before anything is parsed; a disabled agent gets 403 (and an audit entry) on every call.
 */
export async function mcpRoutes(app: FastifyInstance, options: {
  resolver: MemberKeyResolver;
  toolCalls: ToolCallService;
  bodyLimit: number;
  sessionIdleMs: number;
}) {
  const sessions = new Map<string, ToolSession>();

  const sweep = setInterval(() => {
    const cutoff = Date.now() - options.sessionIdleMs;
    for (const [id, s] of sessions) if (s.lastSeen < cutoff) { sessions.delete(id); void s.transport.close(); }
  }, 60_000);
  sweep.unref();
  // preClose, not onClose: open SSE streams would keep the server from closing at all.
  app.addHook('preClose', async () => {
    clearInterval(sweep);
    await Promise.all([...sessions.values()].map((s) => s.transport.close().catch(() => undefined)));
    sessions.clear();
  });

  // The body is parsed here, not by Fastify, so malformed JSON becomes JSON-RPC -32700.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string', bodyLimit: options.bodyLimit }, (_req, body, done) => done(null, body));

  app.addHook('onRequest', async (request, reply) => {
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
        method: first.method || request.method, name: first.name, args: extractArgs(body),
        sessionId: headerOf(request, 'mcp-session-id'), callerIp: request.ip,
      }, 'Agent is disabled');
      return rpcError(reply, 403, JSONRPC_FORBIDDEN, 'This agent is disabled', first.id);
    }

    const sessionId = headerOf(request, 'mcp-session-id');
    let session = sessionId ? sessions.get(sessionId) : undefined;
    if (sessionId && (!session || session.keyId !== context.keyId)) {
      return rpcError(reply, 404, JSONRPC_SESSION_NOT_FOUND, 'Session not found: initialize a new session');
    }
    if (!session) {
      const isInit = request.method === 'POST' && (Array.isArray(body) ? body.some(isInitializeRequest) : isInitializeRequest(body));
      if (!isInit) return rpcError(reply, 400, JSONRPC_INVALID_REQUEST, 'Bad request: no valid Mcp-Session-Id; send initialize first');
      const created: ToolSession = {
        keyId: context.keyId,
        lastSeen: Date.now(),
        transport: new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          enableJsonResponse: true,
          onsessioninitialized: (id) => { sessions.set(id, created); },
        }),
      };
      created.transport.onclose = () => {
        if (created.transport.sessionId) sessions.delete(created.transport.sessionId);
      };
      await buildMcpServer(options.toolCalls).connect(created.transport);
      session = created;
    }
    session.lastSeen = Date.now();

    reply.hijack();
    const raw = request.raw as typeof request.raw & { auth?: AuthInfo };
    raw.auth = callerAuthInfo({ context, callerIp: request.ip });
    try {
      await session.transport.handleRequest(raw, reply.raw, body as JSONRPCMessage | JSONRPCMessage[] | undefined);
    } catch (err) {
      request.log.error({ err }, 'MCP transport failed');
      if (!reply.raw.headersSent) {
        reply.raw.writeHead(500, { 'content-type': 'application/json' });
        reply.raw.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32603, message: 'Internal error' }, id: null }));
      }
    }
  };

  app.route({ method: ['POST', 'GET', 'DELETE'], url: '/mcp', handler: handle });
}

function headerOf(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function extractArgs(body: unknown): Record<string, unknown> {
  const message = (Array.isArray(body) ? body[0] : body) as { params?: { arguments?: unknown } } | undefined;
  const args = message?.params?.arguments;
  return args && typeof args === 'object' && !Array.isArray(args) ? (args as Record<string, unknown>) : {};
}
