import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { isolatingFetch } from '@portcullis/core';

/** The official MCP SDK client, connected to `/mcp` with a member key. */
export async function connectMcp(baseUrl: string, memberKey: string, protocolVersion?: string): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const client = new Client({ name: 'portcullis-e2e', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`), {
    fetch: isolatingFetch,
    requestInit: { headers: { Authorization: `Bearer ${memberKey}` } },
    ...(protocolVersion ? { protocolVersion } : {}),
  } as ConstructorParameters<typeof StreamableHTTPClientTransport>[1]);
  await client.connect(transport);
  return { client, transport };
}
