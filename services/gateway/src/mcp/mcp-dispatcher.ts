import {
  CallToolRequestSchema, ErrorCode, InitializeRequestSchema, LATEST_PROTOCOL_VERSION, McpError, SUPPORTED_PROTOCOL_VERSIONS,
  type JSONRPCRequest,
} from '@modelcontextprotocol/sdk/types.js';
import type { MemberContext } from '../modules/identity/member-context.ts';
import { CLIENT_CAPABILITIES_META_KEY, envelopeOf } from './mcp-era.ts';
import { listToolsFor } from './tool-catalog-view.ts';
import type { ToolCallService } from './tool-call-service.ts';

export const SERVER_INFO = { name: 'portcullis', version: '0.1.0' } as const;
export const SERVER_CAPABILITIES = { tools: {} } as const;

/** Who sent a request, as the route resolved it: the member behind the key, and the tool session. */
export interface McpCaller {
  context: MemberContext;
  callerIp: string;
  /** The tool session the request belongs to (the route checked it), if any. */
  sessionId: string | undefined;
  /** A 2026-07-28 request: a held call may answer `input_required` (decision 063). */
  modern?: boolean;
}

/** Whether a 2026-07-28 request's envelope declares the `elicitation.url` client capability. */
function declaresUrlElicitation(params: unknown): boolean {
  const capabilities = envelopeOf(params)?.[CLIENT_CAPABILITIES_META_KEY] as { elicitation?: { url?: unknown } } | undefined;
  const url = capabilities?.elicitation?.url;
  return url !== null && typeof url === 'object';
}

type JsonRpcId = JSONRPCRequest['id'];
export type JsonRpcReply =
  | { jsonrpc: '2.0'; id: JsonRpcId; result: Record<string, unknown> }
  | { jsonrpc: '2.0'; id: JsonRpcId; error: { code: number; message: string; data?: unknown } };

/** The SDK schema each method's params are validated with. */
const PARAMS_SCHEMAS: Record<string, typeof CallToolRequestSchema | typeof InitializeRequestSchema> = {
  initialize: InitializeRequestSchema,
  'tools/call': CallToolRequestSchema,
};

type Handler = (request: JSONRPCRequest, caller: McpCaller) => Record<string, unknown> | Promise<Record<string, unknown>>;

/**
 * The JSON-RPC methods `/mcp` serves, as plain functions built once for the process: no MCP
 * server or transport per request. Requests were validated against the SDK's
 * `JSONRPCMessageSchema` by the route; each method validates its params with the SDK's own
 * request schema and answers what the SDK's `Server` would (negotiated `initialize`, `ping`,
 * `tools/list`, `tools/call`; -32601 for any other method, -32602 for bad params). Handlers
 * read the caller of this request, so approvals, revocations and new connections apply at once.
 */
export function createMcpDispatcher(deps: { toolCalls: ToolCallService; onError?: (err: unknown) => void }) {
  const handlers = new Map<string, Handler>([
    ['initialize', (request) => {
      const parsed = InitializeRequestSchema.safeParse(request);
      if (!parsed.success) throw new McpError(ErrorCode.InvalidParams, `Invalid initialize request: ${parsed.error.message}`);
      const requested = parsed.data.params.protocolVersion;
      return {
        protocolVersion: SUPPORTED_PROTOCOL_VERSIONS.includes(requested) ? requested : LATEST_PROTOCOL_VERSION,
        capabilities: SERVER_CAPABILITIES,
        serverInfo: SERVER_INFO,
      };
    }],
    ['ping', () => ({})],
    ['tools/list', (_request, caller) => ({ tools: listToolsFor(caller.context) })],
    ['tools/call', async (request, caller) => {
      const parsed = CallToolRequestSchema.safeParse(request);
      if (!parsed.success) throw new McpError(ErrorCode.InvalidParams, `Invalid tools/call request: ${parsed.error.message}`);
      const result = await deps.toolCalls.callTool(caller.context, {
        name: parsed.data.params.name,
        args: parsed.data.params.arguments ?? {},
        sessionId: caller.sessionId,
        callerIp: caller.callerIp,
        ...(caller.modern ? {
          approvalFlow: {
            urlElicitation: declaresUrlElicitation(request.params),
            requestState: (request.params as Record<string, unknown>).requestState,
            inputResponses: (request.params as Record<string, unknown>).inputResponses,
          },
        } : {}),
      });
      return result as Record<string, unknown>;
    }],
  ]);

  return {
    /**
     * Whether a request's params fail its method's SDK schema, as the -32602 error `answer` would
     * give; undefined when they pass (or the method takes none of its own).
     */
    paramsProblem(request: JSONRPCRequest): { code: number; message: string } | undefined {
      const schema = PARAMS_SCHEMAS[request.method];
      const parsed = schema?.safeParse(request);
      return parsed && !parsed.success ? { code: ErrorCode.InvalidParams, message: new McpError(ErrorCode.InvalidParams, `Invalid ${request.method} request: ${parsed.error.message}`).message } : undefined;
    },

    /** The reply to one request; never throws (a failure is a JSON-RPC error). */
    async answer(request: JSONRPCRequest, caller: McpCaller): Promise<JsonRpcReply> {
      const handler = handlers.get(request.method);
      if (!handler) return { jsonrpc: '2.0', id: request.id, error: { code: ErrorCode.MethodNotFound, message: 'Method not found' } };
      try {
        return { jsonrpc: '2.0', id: request.id, result: await handler(request, caller) };
      } catch (err) {
        if (err instanceof McpError) {
          return { jsonrpc: '2.0', id: request.id, error: { code: err.code, message: err.message, ...(err.data !== undefined ? { data: err.data } : {}) } };
        }
        deps.onError?.(err);
        return { jsonrpc: '2.0', id: request.id, error: { code: ErrorCode.InternalError, message: 'Internal error' } };
      }
    },
  };
}

export type McpDispatcher = ReturnType<typeof createMcpDispatcher>;
