import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { SandboxConnector } from './sandbox-connector.ts';
import { executeTool, type CallerIdentity } from './tools/tool-executor.ts';

/** The `AuthInfo` the endpoint attaches to a request once its token verified. */
export function authInfoOf(token: string, connectorKey: string, identity: CallerIdentity): AuthInfo {
  return { token, clientId: connectorKey, scopes: [], extra: { login: identity.login, ...(identity.name !== undefined ? { name: identity.name } : {}) } };
}

/**
 * A JSON-RPC error for the SDK to send. Not `McpError`: its message already carries an
 * "MCP error <code>:" prefix, which the client would then repeat.
 */
function protocolError(code: ErrorCode, message: string): Error & { code: number } {
  return Object.assign(new Error(message), { code });
}

function identityOf(authInfo: AuthInfo | undefined): CallerIdentity {
  const login = authInfo?.extra?.login;
  const name = authInfo?.extra?.name;
  // The endpoint authenticates every request before it reaches a server; this guards wiring mistakes.
  if (typeof login !== 'string') throw protocolError(ErrorCode.InvalidRequest, 'The request carries no verified identity');
  return typeof name === 'string' ? { login, name } : { login };
}

/**
 * The MCP server of one sandbox connector for one session: the low-level `Server`, because
 * the tools come from catalog data rather than zod shapes. `tools/list` lists the catalog's
 * tools as they are; `tools/call` runs them against the connector's store as the member whose
 * token came with the request. An unknown tool is a protocol error (-32602), as the MCP
 * specification shows; bad arguments and missing records are `isError` results.
 */
export function createConnectorMcpServer(sandbox: SandboxConnector): Server {
  const { key } = sandbox.connector;
  const server = new Server({ name: `portcullis-sandbox-${key}`, version: '0.1.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [...sandbox.listedTools] }));
  server.setRequestHandler(CallToolRequestSchema, (request, extra): CallToolResult => {
    const identity = identityOf(extra.authInfo);
    const plan = sandbox.plans.get(request.params.name);
    if (!plan) throw protocolError(ErrorCode.InvalidParams, `Unknown tool: ${request.params.name}`);
    const outcome = executeTool(plan, sandbox.store, { connector: key, args: request.params.arguments ?? {}, identity });
    if (outcome.isError) return { content: [{ type: 'text', text: outcome.message }], isError: true };
    return { content: [{ type: 'text', text: JSON.stringify(outcome.body) }] };
  });
  return server;
}
