import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { describe, expect, it } from 'vitest';
import { createConnectorMcpServer } from '../mcp-server.ts';
import { createSandboxConnectors } from '../sandbox-connector.ts';
import { SessionRegistry, type McpSession } from './session-registry.ts';

async function sessionSeenAt(id: string, lastSeenAt: number): Promise<McpSession & { closed: () => boolean }> {
  const server = createConnectorMcpServer(createSandboxConnectors().get('github')!);
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => id, enableJsonResponse: true });
  let closed = false;
  transport.onclose = () => {
    closed = true;
  };
  await server.connect(transport);
  return { id, connectorKey: 'github', login: 'alice', server, transport, lastSeenAt, closed: () => closed };
}

describe('SessionRegistry', () => {
  it('closes sessions idle for longer than the limit and keeps the others', async () => {
    const registry = new SessionRegistry();
    const stale = await sessionSeenAt('stale', 1_000);
    const recent = await sessionSeenAt('recent', 9_000);
    registry.add(stale);
    registry.add(recent);

    expect(await registry.closeIdle(10_000, 5_000)).toBe(1);
    expect(stale.closed()).toBe(true);
    expect(registry.get('stale')).toBeUndefined();
    expect(registry.get('recent')).toBe(recent);

    await registry.closeAll();
    expect(recent.closed()).toBe(true);
    expect(registry.size).toBe(0);
  });
});
