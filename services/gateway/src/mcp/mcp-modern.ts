import type { FastifyReply, FastifyRequest } from 'fastify';
import { ErrorCode, type JSONRPCRequest } from '@modelcontextprotocol/sdk/types.js';
import type { MemberContext } from '../modules/identity/member-context.ts';
import type { SessionRegistry } from '../modules/sessions/session-registry.ts';
import {
  CLIENT_INFO_META_KEY, envelopeOf, JSONRPC_UNSUPPORTED_PROTOCOL_VERSION, MODERN_PROTOCOL_VERSIONS, standardHeaderProblem,
  type EraHeaders, type EraRoute,
} from './mcp-era.ts';
import { SERVER_CAPABILITIES, SERVER_INFO, type JsonRpcReply, type McpDispatcher } from './mcp-dispatcher.ts';
import { timed } from './stage-timing.ts';
import { headerOf, rpcError, storedClientText } from './mcp-http.ts';

/**
 * The `_meta` key a stateless client may send to name its tool session (decision 032): calls
 * with the same member key, client name and handle form one session.
 */
export const SESSION_HANDLE_META_KEY = 'portcullis/sessionHandle';
const SERVER_INFO_META_KEY = 'io.modelcontextprotocol/serverInfo';
/** Results that carry the 2026-07-28 cache fields; they depend on the caller, so nothing is shared or kept. */
const CACHEABLE_METHODS = new Set(['tools/list', 'server/discover']);
/** The methods that do tool work, and so belong to the caller's tool session. */
const TOOL_METHODS = new Set(['tools/list', 'tools/call']);

/** The standard 2026-07-28 request headers of an HTTP request. */
export function eraHeadersOf(request: FastifyRequest): EraHeaders {
  return { protocolVersion: headerOf(request, 'mcp-protocol-version'), method: headerOf(request, 'mcp-method'), name: headerOf(request, 'mcp-name') };
}

/** A valid handle: 1–128 characters, none of them control characters. */
const isSessionHandle = (value: unknown): value is string =>
  typeof value === 'string' && value.length > 0 && value.length <= 128 && !/[\u0000-\u001F\u007F]/.test(value);

/** A 2026-07-28 result: `resultType`, the cache fields where they apply, and who answered in `_meta`. */
function modernResult(method: string, result: Record<string, unknown>): Record<string, unknown> {
  const meta = result._meta !== null && typeof result._meta === 'object' ? result._meta : {};
  return {
    ...result,
    // A held call's URL elicitation (decision 063) is the one result that is not complete.
    resultType: result.resultType === 'input_required' ? 'input_required' : 'complete',
    ...(CACHEABLE_METHODS.has(method) ? { ttlMs: 0, cacheScope: 'private' } : {}),
    _meta: { ...meta, [SERVER_INFO_META_KEY]: SERVER_INFO },
  };
}

/**
 * `/mcp` for the stateless 2026-07-28 era (decision 032), beside the 2025 era's sessions: no
 * `initialize`, no `Mcp-Session-Id`; every request names its protocol version and client in
 * `_meta` and repeats its method (and tool name) in headers, which must agree with the body.
 * It answers `server/discover`, `tools/list` and `tools/call` through the same dispatcher as
 * the 2025 era, so tool names, `_meta`, results, errors and audit are the same; results add
 * `resultType`. Tool requests belong to the tool session of the caller's stream (member key,
 * client name, optional `portcullis/sessionHandle`), opened on first use and again after it
 * ended, so session limits, activity and reset mean the same in both eras.
 */
export function createModernMcp(deps: { dispatcher: McpDispatcher; sessions: Pick<SessionRegistry, 'streamSession' | 'touch'> }) {
  const send = (reply: FastifyReply, status: number, payload: object) => reply.code(status).type('application/json').send(JSON.stringify(payload));

  async function answer(request: JSONRPCRequest, caller: { context: MemberContext; callerIp: string }): Promise<JsonRpcReply> {
    if (request.method === 'server/discover') {
      return { jsonrpc: '2.0', id: request.id, result: modernResult(request.method, { supportedVersions: [...MODERN_PROTOCOL_VERSIONS], capabilities: SERVER_CAPABILITIES }) };
    }
    // Bad params are refused before the request opens or touches a tool session.
    const invalid = deps.dispatcher.paramsProblem(request);
    if (invalid) return { jsonrpc: '2.0', id: request.id, error: invalid };
    const envelope = envelopeOf(request.params) ?? {};
    const client = envelope[CLIENT_INFO_META_KEY] as { name?: unknown; version?: unknown } | undefined;
    const { context } = caller;
    const session = await timed('session', () => deps.sessions.streamSession({
      agentId: context.agentId, memberId: context.memberId, keyId: context.keyId,
      clientName: storedClientText(client?.name), clientVersion: storedClientText(client?.version), protocolVersion: MODERN_PROTOCOL_VERSIONS[0],
      handle: (envelope[SESSION_HANDLE_META_KEY] as string | undefined) ?? '',
    }));
    deps.sessions.touch(session.id);
    const reply = await deps.dispatcher.answer(request, { ...caller, sessionId: session.id, modern: true });
    return 'result' in reply ? { ...reply, result: modernResult(request.method, reply.result) } : reply;
  }

  return {
    /** Answers one POST the era classifier did not leave to the 2025 era. */
    async serve(route: Exclude<EraRoute, { kind: 'legacy' }>, body: unknown, request: FastifyRequest, reply: FastifyReply, context: MemberContext) {
      const bodyId = (body as { id?: unknown } | null)?.id;
      const echoedId = typeof bodyId === 'string' || typeof bodyId === 'number' ? bodyId : null;
      if (route.kind === 'reject') return rpcError(reply, 400, route.code, route.message, echoedId, route.data);

      const { message, revision } = route;
      if (!(MODERN_PROTOCOL_VERSIONS as readonly string[]).includes(revision)) {
        const requested = revision.slice(0, 64);
        return rpcError(reply, 400, JSONRPC_UNSUPPORTED_PROTOCOL_VERSION, `Unsupported protocol version: ${requested}`, echoedId, { supported: [...MODERN_PROTOCOL_VERSIONS], requested });
      }
      if (!('id' in message)) return reply.code(202).send();
      const headerProblem = standardHeaderProblem(message, revision, eraHeadersOf(request));
      if (headerProblem) return rpcError(reply, 400, headerProblem.code, headerProblem.message, message.id, headerProblem.data);
      if (message.method !== 'server/discover' && !TOOL_METHODS.has(message.method)) {
        return rpcError(reply, 404, ErrorCode.MethodNotFound, 'Method not found', message.id);
      }
      const handle = envelopeOf(message.params)?.[SESSION_HANDLE_META_KEY];
      if (handle !== undefined && !isSessionHandle(handle)) {
        return rpcError(reply, 400, ErrorCode.InvalidParams, `Invalid params: _meta["${SESSION_HANDLE_META_KEY}"] must be a string of 1 to 128 characters without control characters`, message.id);
      }
      return send(reply, 200, await answer(message, { context, callerIp: request.ip }));
    },
  };
}
