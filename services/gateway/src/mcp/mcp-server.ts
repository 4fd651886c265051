import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type { MemberContext } from '../modules/identity/member-context.ts';
import { listToolsFor } from './tool-catalog-view.ts';
import type { ToolCallService } from './tool-call-service.ts';

/** What the route attaches to each request for the MCP handlers (as the SDK's `authInfo`). */
export interface McpCaller {
  context: MemberContext;
  callerIp: string;
  /** The tool session the request belongs to (the route checked it against the registry). */
  sessionId: string | undefined;
}

export function callerAuthInfo(caller: McpCaller): AuthInfo {
  return { token: '', clientId: caller.context.keyId, scopes: [], extra: { caller } };
}

function callerOf(authInfo: AuthInfo | undefined): McpCaller {
  const caller = authInfo?.extra?.caller as McpCaller | undefined;
  if (!caller) throw new Error('MCP request reached a handler without an authenticated caller');
  return caller;
}

/**
 * One MCP server per request (the route builds one for each). Handlers read the caller of the current request (not of
 * the session's first request), so approvals, revocations and new connections apply at once.
 */
export function buildMcpServer(toolCalls: ToolCallService): Server {
  // The low-level Server: tools are data from the catalog, not code (McpServer wants zod shapes).
  const server = new Server({ name: 'portcullis', version: '0.1.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, (_request, extra) => ({ tools: listToolsFor(callerOf(extra.authInfo).context) }));
  server.setRequestHandler(CallToolRequestSchema, (request, extra) => {
    const caller = callerOf(extra.authInfo);
    return toolCalls.callTool(caller.context, {
      name: request.params.name,
      args: request.params.arguments ?? {},
      sessionId: caller.sessionId,
      callerIp: caller.callerIp,
    });
  });
  return server;
}
