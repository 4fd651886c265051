import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { MAX_BATCH_SIZE } from '@modelcontextprotocol/sdk/server/requestBody.js';
import { isJsonContentType } from '@modelcontextprotocol/sdk/shared/mediaType.js';
import {
  isInitializeRequest, isJSONRPCRequest, JSONRPCMessageSchema, SUPPORTED_PROTOCOL_VERSIONS, type InitializeRequest, type JSONRPCMessage,
} from '@modelcontextprotocol/sdk/types.js';
import type { MemberKeyResolver } from '../modules/identity/member-key-resolver.ts';
import type { AgentTokenResolver } from '../oauth/agent-token-resolver.ts';
import type { MemberContext } from '../modules/identity/member-context.ts';
import type { SessionRegistry } from '../modules/sessions/session-registry.ts';
import { createMcpDispatcher } from './mcp-dispatcher.ts';
import { headerOf, rpcError, storedClientText } from './mcp-http.ts';
import { classifyEra } from './mcp-era.ts';
import { createModernMcp, eraHeadersOf } from './mcp-modern.ts';
import { startStage, timed } from './stage-timing.ts';
import type { ToolCallService } from './tool-call-service.ts';
import { createOriginCheck, type McpOriginPolicy } from './origin-guard.ts';
import type { McpQuota, QuotaRefusal } from './call-quota.ts';
import { clientIpKey } from '../plugins/rate-limits.ts';

/** JSON-RPC error codes used for protocol faults on `/mcp`. */
export const JSONRPC_PARSE_ERROR = -32700;
export const JSONRPC_INVALID_REQUEST = -32600;
/** The SDK transport's code for HTTP-level refusals (Accept, Content-Type, protocol version). */
export const JSONRPC_SERVER_ERROR = -32000;
/** Implementation-defined: authentication and authorization faults at the HTTP layer. */
export const JSONRPC_UNAUTHORIZED = -32001;
export const JSONRPC_FORBIDDEN = -32003;
export const JSONRPC_SESSION_NOT_FOUND = -32004;
/** Implementation-defined: a quota of decision 069 refused the request (HTTP 429, `data.retryAfterSeconds`). */
export const JSONRPC_RATE_LIMITED = -32029;

declare module 'fastify' {
  interface FastifyRequest { mcpContext?: MemberContext }
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
  /** OAuth access tokens Portcullis issued (decision 053): they act as the member key they were granted with. */
  agentTokens: AgentTokenResolver;
  /** RFC 9728 metadata URL, named in every 401 so OAuth clients can discover how to sign in. */
  resourceMetadataUrl: string;
  toolCalls: ToolCallService;
  sessions: SessionRegistry;
  bodyLimit: number;
  origins: McpOriginPolicy;
  /** Calls per member key and agent, failed authentications per client IP (decision 069). */
  quota: McpQuota;
}) {
  const originRefusal = createOriginCheck(options.origins);
  const { quota } = options;

  /**
   * A quota's 429, held for the penalty first: a client that retries at once, ignoring
   * Retry-After, then cannot turn refusals into a load of their own.
   */
  const refuse = async (reply: FastifyReply, refusal: QuotaRefusal, id: unknown = null) => {
    await new Promise((resolve) => setTimeout(resolve, quota.limits.penaltyMs));
    reply.header('retry-after', String(refusal.retryAfterSeconds));
    return rpcError(reply, 429, JSONRPC_RATE_LIMITED, refusal.reason, id, { retryAfterSeconds: refusal.retryAfterSeconds });
  };

  const dispatcher = createMcpDispatcher({ toolCalls: options.toolCalls, onError: (err) => app.log.error({ err }, 'MCP request failed') });
  const modern = createModernMcp({ dispatcher, sessions: options.sessions });

  // The body is parsed here, not by Fastify, so malformed JSON becomes JSON-RPC -32700.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string', bodyLimit: options.bodyLimit }, (_req, body, done) => done(null, body));

  app.addHook('onRequest', async (request, reply) => {
    const finished = startStage('request');
    reply.raw.once('finish', finished);
    const refusal = originRefusal(request.headers);
    if (refusal) return rpcError(reply, 403, JSONRPC_FORBIDDEN, refusal);
    const key = bearerOf(request);
    // An address that keeps presenting bad keys or tokens is refused before any is looked up.
    const ip = key ? clientIpKey(request) : '';
    const blocked = key ? quota.authBlocked(ip) : undefined;
    if (blocked) return refuse(reply, blocked);
    const context = key ? await timed('key', () => (key.startsWith('pcm_') ? options.resolver : options.agentTokens).resolve(key)) : undefined;
    if (!context) {
      if (key) quota.authFailed(ip);
      // RFC 6750 §3.1: a request without credentials gets the challenge without an error code.
      const error = key ? 'error="invalid_token", ' : '';
      reply.header('WWW-Authenticate', `Bearer realm="portcullis", ${error}resource_metadata="${options.resourceMetadataUrl}"`);
      return rpcError(reply, 401, JSONRPC_UNAUTHORIZED, key ? 'Invalid or revoked member key' : 'A member key is required: Authorization: Bearer pcm_…');
    }
    request.mcpContext = context;
  });

  /**
   * Audits a request refused before it is served (as its first message), answering that
   * message's id once the entry is kept (single-process mode: in the local log, decision 070).
   */
  const auditRefusal = async (request: FastifyRequest, body: unknown, reason: string): Promise<unknown> => {
    const first = firstRequest(body);
    await options.toolCalls.auditRefusedRequest(request.mcpContext!, {
      method: first.method || `HTTP ${request.method}`, name: first.name, args: extractArgs(body),
      sessionId: headerOf(request, 'mcp-session-id'), callerIp: request.ip,
    }, reason);
    return first.id;
  };

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
      return rpcError(reply, 403, JSONRPC_FORBIDDEN, 'This agent is disabled', await auditRefusal(request, body, 'Agent is disabled'));
    }

    // Each JSON-RPC request of a batch counts; a GET, a DELETE or a batch of notifications counts once.
    const overQuota = quota.takeCalls(context.keyId, context.agentId, Math.max(1, requestCountOf(body)));
    if (overQuota) return refuse(reply, overQuota, await auditRefusal(request, body, overQuota.reason));

    const sessionId = headerOf(request, 'mcp-session-id');
    if (request.method === 'GET') {
      return reply.code(405).header('allow', 'POST, DELETE').type('application/json')
        .send({ jsonrpc: '2.0', error: { code: JSONRPC_INVALID_REQUEST, message: 'This server sends no server-initiated messages: use POST' }, id: null });
    }
    if (request.method === 'DELETE') {
      if (!sessionId) return rpcError(reply, 400, JSONRPC_INVALID_REQUEST, 'Bad request: no valid Mcp-Session-Id; send initialize first');
      const session = await options.sessions.findLive(sessionId);
      if (!session || session.keyId !== context.keyId) return rpcError(reply, 404, JSONRPC_SESSION_NOT_FOUND, 'Session not found: initialize a new session');
      await options.sessions.end(sessionId, 'client');
      return reply.code(200).send();
    }

    // POST: the Streamable HTTP rules the SDK's transport applies, then each request answered here.
    const accept = request.headers.accept ?? '';
    if (!accept.includes('application/json') || !accept.includes('text/event-stream')) {
      return rpcError(reply, 406, JSONRPC_SERVER_ERROR, 'Not Acceptable: Client must accept both application/json and text/event-stream');
    }
    if (!isJsonContentType(request.headers['content-type'])) {
      return rpcError(reply, 415, JSONRPC_SERVER_ERROR, 'Unsupported Media Type: Content-Type must be application/json');
    }
    if (Array.isArray(body) && body.length > MAX_BATCH_SIZE) {
      return rpcError(reply, 400, JSONRPC_INVALID_REQUEST, `Invalid Request: Batch must not exceed ${MAX_BATCH_SIZE} messages`);
    }
    // A request that claims the stateless 2026-07-28 era is served apart (decision 032).
    const era = classifyEra(body, eraHeadersOf(request));
    if (era.kind !== 'legacy') return modern.serve(era, body, request, reply, context);
    const parsed = startStage('parse');
    const parsedMessages = (Array.isArray(body) ? body : [body]).map((m) => JSONRPCMessageSchema.safeParse(m));
    parsed();
    if (parsedMessages.length === 0 || parsedMessages.some((m) => !m.success)) {
      return rpcError(reply, 400, JSONRPC_PARSE_ERROR, 'Parse error: Invalid JSON-RPC message');
    }
    const messages = parsedMessages.map((m) => m.data!) as JSONRPCMessage[];

    let servingId: string;
    // The method name first: the SDK's schema check is only worth running on an initialize.
    const init = messages.find((m) => 'method' in m && m.method === 'initialize' && isInitializeRequest(m)) as InitializeRequest | undefined;
    if (init) {
      if (messages.length > 1) return rpcError(reply, 400, JSONRPC_INVALID_REQUEST, 'Invalid Request: Only one initialization request is allowed');
      servingId = randomUUID();
      await timed('session', () => options.sessions.open({ id: servingId, agentId: context.agentId, memberId: context.memberId, keyId: context.keyId, ...clientOf(init) }));
    } else {
      if (!sessionId) return rpcError(reply, 400, JSONRPC_INVALID_REQUEST, 'Bad request: no valid Mcp-Session-Id; send initialize first');
      const session = await timed('session', () => options.sessions.findLive(sessionId));
      if (!session || session.keyId !== context.keyId) return rpcError(reply, 404, JSONRPC_SESSION_NOT_FOUND, 'Session not found: initialize a new session');
      const version = headerOf(request, 'mcp-protocol-version');
      if (version !== undefined && !SUPPORTED_PROTOCOL_VERSIONS.includes(version)) {
        return rpcError(reply, 400, JSONRPC_SERVER_ERROR, `Bad Request: Unsupported protocol version: ${version.slice(0, 64)} (supported versions: ${SUPPORTED_PROTOCOL_VERSIONS.join(', ')})`);
      }
      options.sessions.touch(sessionId);
      servingId = sessionId;
    }
    reply.header('mcp-session-id', servingId);

    // Notifications and responses need no answer (the SDK's server ignores what it cannot act on).
    const requests = messages.filter(isJSONRPCRequest);
    if (requests.length === 0) return reply.code(202).send();
    const caller = { context, callerIp: request.ip, sessionId: servingId };
    const replies = await Promise.all(requests.map((r) => dispatcher.answer(r, caller)));
    return reply.code(200).type('application/json').send(JSON.stringify(replies.length === 1 ? replies[0] : replies));
  };

  app.route({ method: ['POST', 'GET', 'DELETE'], url: '/mcp', handler: handle });
}

/** Who the client of an `initialize` says it is, as stored with its tool session. */
function clientOf(init: InitializeRequest): { clientName: string; clientVersion: string; protocolVersion: string } {
  const { clientInfo, protocolVersion } = init.params;
  return { clientName: storedClientText(clientInfo?.name), clientVersion: storedClientText(clientInfo?.version), protocolVersion: storedClientText(protocolVersion) };
}

/** JSON-RPC requests (a method and an id) in a message or batch. */
function requestCountOf(body: unknown): number {
  return (Array.isArray(body) ? body : [body]).filter((m) => m !== null && typeof m === 'object' && 'method' in m && 'id' in m).length;
}

function extractArgs(body: unknown): Record<string, unknown> {
  const message = (Array.isArray(body) ? body[0] : body) as { params?: { arguments?: unknown } } | undefined;
  const args = message?.params?.arguments;
  return args && typeof args === 'object' && !Array.isArray(args) ? (args as Record<string, unknown>) : {};
}
