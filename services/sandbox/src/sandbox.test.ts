import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { connectors, getConnector, inputSchemaOf } from '@portcullis/core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { listEntities, startSandbox, type Sandbox, type ToolResultBody } from './index.ts';

const SECRET = 'sandbox-test-secret-0123456789abcdef';
const OTHER_SECRET = 'another-sandbox-secret-0123456789abcd';

const INITIALIZE = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw-fetch', version: '1' } },
};
const LIST_TOOLS = { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} };

let sandbox: Sandbox;
const openClients: Client[] = [];

beforeAll(async () => {
  sandbox = await startSandbox({ secret: SECRET, port: 0 });
});

afterEach(async () => {
  await Promise.all(openClients.splice(0).map((client) => client.close()));
});

afterAll(async () => {
  await sandbox.close();
});

/** A real SDK client connected to one sandbox connector with a Bearer token. */
async function connect(target: Sandbox, service: string, token: string): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const client = new Client({ name: 'sandbox-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(target.upstreamUrl(service)), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  openClients.push(client);
  return { client, transport };
}

async function callTool(client: Client, name: string, args: Record<string, unknown>): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args })) as CallToolResult;
}

function bodyOf(result: CallToolResult): ToolResultBody {
  expect(result.isError ?? false).toBe(false);
  const [content] = result.content;
  if (content?.type !== 'text') throw new Error('expected one text content');
  return JSON.parse(content.text) as ToolResultBody;
}

/** A raw MCP POST, for what the SDK client would never send. */
function postMcp(target: Sandbox, service: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(target.upstreamUrl(service), {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify(body),
  });
}

describe('sandbox MCP servers', () => {
  it('list every catalog tool of a connector with its exact name, description and schema', async () => {
    const { client } = await connect(sandbox, 'github', sandbox.issueToken('github', { login: 'alice' }));
    const { tools } = await client.listTools();
    const github = getConnector('github')!;
    expect(tools).toHaveLength(40);
    expect(tools).toEqual(github.tools.map((tool) => ({ name: tool.name, description: tool.description, inputSchema: inputSchemaOf(tool) })));
  });

  it('serve all 16 connectors and their 281 tools', async () => {
    let total = 0;
    for (const connector of connectors) {
      const { client } = await connect(sandbox, connector.key, sandbox.issueToken(connector.key, { login: 'alice' }));
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name)).toEqual(connector.tools.map((t) => t.name));
      total += tools.length;
    }
    expect(connectors).toHaveLength(16);
    expect(total).toBe(281);
  });

  it('answer a call with the identity of the token that came with it and the arguments unchanged', async () => {
    const { client: asAlice } = await connect(sandbox, 'github', sandbox.issueToken('github', { login: 'alice', name: 'Alice Doe' }));
    const { client: asBob } = await connect(sandbox, 'github', sandbox.issueToken('github', { login: 'bob' }));
    const args = { owner: 'acme', repo: 'api', method: 'create', title: 'Ünïcode "quoted" title', labels: ['bug'], issue_fields: [{ nested: { deep: [1, 2.5, null] } }] };

    const alices = bodyOf(await callTool(asAlice, 'issue_write', args));
    expect(alices).toMatchObject({ connector: 'github', tool: 'issue_write', identity: { login: 'alice', name: 'Alice Doe' } });
    expect(alices.arguments).toEqual(args);
    expect(bodyOf(await callTool(asBob, 'get_me', {}))).toMatchObject({ identity: { login: 'bob' }, item: { login: 'bob' } });
  });

  it('answer a missing required argument with an isError result, like a real server', async () => {
    const { client } = await connect(sandbox, 'github', sandbox.issueToken('github', { login: 'alice' }));
    const result = await callTool(client, 'create_branch', { owner: 'acme', repo: 'api' });
    expect(result.isError).toBe(true);
    expect(result.content).toEqual([{ type: 'text', text: 'Invalid arguments for tool create_branch: missing required argument "branch"' }]);
  });

  it('answer an unknown tool with a JSON-RPC invalid-params error', async () => {
    const { client } = await connect(sandbox, 'github', sandbox.issueToken('github', { login: 'alice' }));
    await expect(client.callTool({ name: 'no_such_tool', arguments: {} })).rejects.toMatchObject({ code: -32602, message: expect.stringContaining('Unknown tool: no_such_tool') });
  });

  it('show a write in later reads, through the MCP surface and listEntities', async () => {
    const { client } = await connect(sandbox, 'stripe', sandbox.issueToken('stripe', { login: 'carol' }));
    const created = bodyOf(await callTool(client, 'create_customer', { name: 'Dana Example', email: 'dana@example.com' })).item!;
    expect(created).toMatchObject({ name: 'Dana Example', createdBy: 'carol' });
    expect(created.id).toMatch(/^customer_\d{4}$/);

    const listed = bodyOf(await callTool(client, 'list_customers', {})).items!;
    expect(listed.map((c) => c.id)).toEqual(['cus_0001', 'cus_0002', created.id]);
    expect(sandbox.listEntities('stripe', 'customers').map((c) => c.id)).toEqual(['cus_0001', 'cus_0002', created.id]);
    // The module-level listing is the seed, whatever a running sandbox has been through.
    expect(listEntities('stripe', 'customers').map((c) => c.id)).toEqual(['cus_0001', 'cus_0002']);
  });

  it('show a removal in later reads', async () => {
    const { client } = await connect(sandbox, 'cloudflare', sandbox.issueToken('cloudflare', { login: 'alice' }));
    expect(bodyOf(await callTool(client, 'r2_bucket_delete', { name: 'backups' }))).toMatchObject({ deleted: true, item: { id: 'backups' } });
    expect(bodyOf(await callTool(client, 'r2_buckets_list', {})).items!.map((b) => b.id)).toEqual(['assets']);
    const again = await callTool(client, 'r2_bucket_delete', { name: 'backups' });
    expect(again).toMatchObject({ isError: true, content: [{ type: 'text', text: 'No r2 bucket found with name="backups"' }] });
  });
});

describe('sandbox authentication', () => {
  /** The challenge of a request without a token: where OAuth discovery starts, and no error code (RFC 6750 §3.1). */
  const missingChallenge = (target: Sandbox, service: string): string => `Bearer resource_metadata="${target.url}/.well-known/oauth-protected-resource/${service}/mcp"`;
  /** The challenge of a token that did not verify. */
  const invalidChallenge = (target: Sandbox, service: string): string =>
    `Bearer error="invalid_token", error_description="The token is invalid or not for this connector", resource_metadata="${target.url}/.well-known/oauth-protected-resource/${service}/mcp"`;

  async function expectUnauthorized(response: Response, wwwAuthenticate: string): Promise<void> {
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe(wwwAuthenticate);
    expect(await response.json()).toMatchObject({ error: expect.any(String) });
  }

  it('refuses a request without a token', async () => {
    await expectUnauthorized(await postMcp(sandbox, 'github', INITIALIZE), missingChallenge(sandbox, 'github'));
  });

  it('refuses a token that is not a sandbox token', async () => {
    await expectUnauthorized(await postMcp(sandbox, 'github', INITIALIZE, { authorization: 'Bearer pcm_not-a-sandbox-token' }), invalidChallenge(sandbox, 'github'));
    await expectUnauthorized(await postMcp(sandbox, 'github', INITIALIZE, { authorization: 'Basic YWxpY2U6cHc=' }), missingChallenge(sandbox, 'github'));
  });

  it('refuses a token of another connector', async () => {
    const slackToken = sandbox.issueToken('slack', { login: 'alice' });
    await expectUnauthorized(await postMcp(sandbox, 'github', INITIALIZE, { authorization: `Bearer ${slackToken}` }), invalidChallenge(sandbox, 'github'));
    expect((await postMcp(sandbox, 'slack', INITIALIZE, { authorization: `Bearer ${slackToken}` })).status).toBe(200);
  });

  it('refuses a token signed with another secret, before anything else is looked at', async () => {
    const stranger = await startSandbox({ secret: OTHER_SECRET });
    try {
      const foreign = stranger.issueToken('github', { login: 'alice' });
      await expectUnauthorized(await postMcp(sandbox, 'github', LIST_TOOLS, { authorization: `Bearer ${foreign}`, 'mcp-session-id': 'whatever' }), invalidChallenge(sandbox, 'github'));
    } finally {
      await stranger.close();
    }
  });

  it('keeps accepting tokens after a restart with the same secret, and only then', async () => {
    const first = await startSandbox({ secret: SECRET });
    const token = first.issueToken('linear', { login: 'erin', name: 'Erin' });
    const { port } = new URL(first.url);
    await first.close();

    const restarted = await startSandbox({ secret: SECRET, port: Number(port) });
    try {
      expect(restarted.url).toBe(first.url);
      const { client } = await connect(restarted, 'linear', token);
      expect(bodyOf(await callTool(client, 'list_teams', {}))).toMatchObject({ identity: { login: 'erin', name: 'Erin' } });
    } finally {
      await restarted.close();
    }

    const rekeyed = await startSandbox({ secret: OTHER_SECRET });
    try {
      await expectUnauthorized(await postMcp(rekeyed, 'linear', INITIALIZE, { authorization: `Bearer ${token}` }), invalidChallenge(rekeyed, 'linear'));
    } finally {
      await rekeyed.close();
    }
  });
});

describe('sandbox sessions', () => {
  async function initialize(service: string, token: string): Promise<string> {
    const response = await postMcp(sandbox, service, INITIALIZE, { authorization: `Bearer ${token}` });
    expect(response.status).toBe(200);
    const sessionId = response.headers.get('mcp-session-id');
    expect(sessionId).toEqual(expect.any(String));
    return sessionId!;
  }

  it('require a session id on everything but initialize', async () => {
    const token = sandbox.issueToken('github', { login: 'alice' });
    const response = await postMcp(sandbox, 'github', LIST_TOOLS, { authorization: `Bearer ${token}` });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: { code: -32000, message: 'Bad Request: Mcp-Session-Id header is required' } });
  });

  it('answer an unknown session with 404', async () => {
    const token = sandbox.issueToken('github', { login: 'alice' });
    const response = await postMcp(sandbox, 'github', LIST_TOOLS, { authorization: `Bearer ${token}`, 'mcp-session-id': 'no-such-session' });
    expect(response.status).toBe(404);
    expect(await response.json()).toMatchObject({ error: { code: -32001, message: 'Session not found' } });
  });

  it('bind a session to the member and the connector that opened it', async () => {
    const sessionId = await initialize('github', sandbox.issueToken('github', { login: 'alice' }));
    const asAlice = await postMcp(sandbox, 'github', LIST_TOOLS, { authorization: `Bearer ${sandbox.issueToken('github', { login: 'alice' })}`, 'mcp-session-id': sessionId });
    expect(asAlice.status).toBe(200);
    const asBob = await postMcp(sandbox, 'github', LIST_TOOLS, { authorization: `Bearer ${sandbox.issueToken('github', { login: 'bob' })}`, 'mcp-session-id': sessionId });
    expect(asBob.status).toBe(404);
    const onSlack = await postMcp(sandbox, 'slack', LIST_TOOLS, { authorization: `Bearer ${sandbox.issueToken('slack', { login: 'alice' })}`, 'mcp-session-id': sessionId });
    expect(onSlack.status).toBe(404);
  });

  it('end a session on DELETE', async () => {
    const { client, transport } = await connect(sandbox, 'gmail', sandbox.issueToken('gmail', { login: 'alice' }));
    const sessionId = transport.sessionId!;
    await transport.terminateSession();
    const after = await postMcp(sandbox, 'gmail', LIST_TOOLS, { authorization: `Bearer ${sandbox.issueToken('gmail', { login: 'alice' })}`, 'mcp-session-id': sessionId });
    expect(after.status).toBe(404);
    await client.close();
  });

  it('answer malformed JSON with a parse error and other methods with 405', async () => {
    const token = sandbox.issueToken('github', { login: 'alice' });
    const malformed = await fetch(sandbox.upstreamUrl('github'), {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: '{"jsonrpc":',
    });
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toMatchObject({ error: { code: -32700 } });
    const put = await fetch(sandbox.upstreamUrl('github'), { method: 'PUT', headers: { authorization: `Bearer ${token}` } });
    expect(put.status).toBe(405);
    expect(put.headers.get('allow')).toBe('GET, POST, DELETE');
  });
});

describe('sandbox token endpoint', () => {
  function requestToken(service: string, body: string): Promise<Response> {
    return fetch(`${sandbox.url}/_sandbox/${service}/tokens`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  }

  it('issues a token that the connector accepts', async () => {
    const response = await requestToken('github', JSON.stringify({ login: 'dave', name: 'Dave' }));
    expect(response.status).toBe(200);
    const issued = (await response.json()) as { access_token: string; token_type: string };
    expect(issued).toEqual({ access_token: expect.stringMatching(/^sbx_/), token_type: 'Bearer' });
    const { client } = await connect(sandbox, 'github', issued.access_token);
    expect(bodyOf(await callTool(client, 'get_me', {})).identity).toEqual({ login: 'dave', name: 'Dave' });
  });

  it('refuses bad requests with a clear 4xx', async () => {
    for (const body of ['{}', '{"login":""}', '{"login":"dave","admin":true}', '{"login":42}', 'not json']) {
      const response = await requestToken('github', body);
      expect(response.status, body).toBe(400);
      expect(await response.json()).toMatchObject({ error: 'invalid_request', error_description: expect.any(String) });
    }
    expect((await requestToken('nosuchservice', '{"login":"dave"}')).status).toBe(404);
    expect((await fetch(`${sandbox.url}/_sandbox/github/tokens`)).status).toBe(405);
  });

  it('answers health checks and unknown paths', async () => {
    const health = await fetch(`${sandbox.url}/_sandbox/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: 'ok' });
    expect((await fetch(`${sandbox.url}/nosuchservice/mcp`)).status).toBe(404);
  });
});
