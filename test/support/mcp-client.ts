import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { isolatingFetch } from '@portcullis/core';
import { Client as ClientV2, StreamableHTTPClientTransport as StreamableHTTPClientTransportV2, type VersionNegotiationMode } from '@modelcontextprotocol/client';

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

/** An MCP SDK client straight to an upstream (no gateway), with an upstream bearer token. */
export async function connectMcpDirect(url: string, token: string): Promise<Client> {
  const client = new Client({ name: 'portcullis-e2e-direct', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: isolatingFetch, requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return client;
}

/**
 * The official MCP SDK v2 client (`@modelcontextprotocol/client`), connected to `/mcp` with a
 * member key. `mode` is its version negotiation: `{ pin: '2026-07-28' }` and `'auto'` probe
 * with `server/discover` and speak the stateless revision; `'legacy'` (its default) initializes.
 */
export async function connectMcpV2(baseUrl: string, memberKey: string, mode: VersionNegotiationMode, name = 'portcullis-e2e-v2'): Promise<ClientV2> {
  const client = new ClientV2({ name, version: '2.4.0' }, { versionNegotiation: { mode } });
  await client.connect(new StreamableHTTPClientTransportV2(new URL(`${baseUrl}/mcp`), {
    fetch: isolatingFetch,
    requestInit: { headers: { Authorization: `Bearer ${memberKey}` } },
  }));
  return client;
}
