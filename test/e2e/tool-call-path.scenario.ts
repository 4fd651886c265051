import { expect } from 'vitest';
import { connectors } from '@portcullis/core';
import { DEMO_CONNECTED_SERVICES, DEMO_DENY_MESSAGE, DEMO_POLICY_KEY } from '@portcullis/standalone';
import { connectMcp } from '../support/mcp-client.ts';
import { signIn } from '../support/dashboard-session.ts';

export interface ProductUnderTest {
  baseUrl: string;
  memberKey: string;
  ownerEmail: string;
  outboxDir: string;
}

interface ApiEntry {
  id: string; decision: string; reason: string; tool: string; service: string; action: string; resource: string; principal: string;
  matchedPolicyIds: string[]; matchedPolicyNames: string[]; durationMs: number; memberKeyId: string; memberId: string; agentId: string;
  toolArgs: Record<string, unknown>; user: string; memberName: string; callerIp: string; timestamp: string; sessionId?: string;
}

/** Polls GET /api/audit until `predicate` holds or `withinMs` passes. */
export async function auditEntriesUntil(p: ProductUnderTest, cookie: string, predicate: (entries: ApiEntry[]) => boolean, withinMs = 2_000) {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const res = await fetch(`${p.baseUrl}/api/audit`, { headers: { cookie } });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { entries: ApiEntry[]; total: number };
    if (predicate(body.entries) || Date.now() > deadline) return body;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * The issue's end-to-end acceptance, run against a product started in any mode:
 * tools/list filtering and naming, an allowed call through to the sandbox, a forbidden call
 * with the deny message, and both in GET /api/audit within 2 s with every field.
 */
export async function exerciseToolCallPath(p: ProductUnderTest): Promise<{ allowedId: string; deniedId: string; cookie: string }> {
  const { client, transport } = await connectMcp(p.baseUrl, p.memberKey);
  try {
    // tools/list: exactly the tools of connectors enabled on the agent AND connected by the caller.
    const { tools } = await client.listTools();
    const expected = connectors.filter((c) => DEMO_CONNECTED_SERVICES.includes(c.key)).flatMap((c) => c.tools.map((t) => `${c.key}__${t.name}`));
    expect(tools.map((t) => t.name).sort()).toEqual(expected.sort());
    expect(tools.some((t) => t.name.startsWith('stripe__'))).toBe(false); // enabled, not connected
    const issueWrite = tools.find((t) => t.name === 'github__issue_write');
    expect(issueWrite?._meta).toEqual({ portcullis_service: 'github', portcullis_service_label: 'GitHub' });
    expect(issueWrite?.inputSchema.type).toBe('object');
    expect(issueWrite?.inputSchema.properties).toHaveProperty('owner');
    expect(issueWrite?.description).toBeTruthy();

    // An allowed call returns the sandbox's result, made with the member's own token.
    const allowed = await client.callTool({ name: 'github__get_file_contents', arguments: { owner: 'acme', repo: 'api', path: 'README.md' } });
    expect(allowed.isError).toBeFalsy();
    const allowedBody = JSON.parse((allowed.content as Array<{ text: string }>)[0]!.text) as { connector: string; tool: string; identity: { login: string }; arguments: Record<string, unknown> };
    expect(allowedBody).toMatchObject({ connector: 'github', tool: 'get_file_contents', identity: { login: 'demo-user' }, arguments: { owner: 'acme', repo: 'api', path: 'README.md' } });

    // A call forbidden by a policy returns isError with the policy's deny message.
    const denied = await client.callTool({ name: 'github__delete_repository', arguments: { owner: 'acme', repo: 'api' } });
    expect(denied.isError).toBe(true);
    expect((denied.content as Array<{ text: string }>)[0]!.text).toBe(DEMO_DENY_MESSAGE);
  } finally {
    await transport.terminateSession().catch(() => undefined);
    await client.close();
  }

  // Both appear in GET /api/audit within 2 s.
  const cookie = await signIn(p.baseUrl, p.outboxDir, p.ownerEmail);
  const started = Date.now();
  const { entries } = await auditEntriesUntil(p, cookie, (es) =>
    // The allowed call's completed entry (its write-ahead record says the outcome is pending).
    es.some((e) => e.tool === 'get_file_contents' && e.reason === 'No forbid policy matched') && es.some((e) => e.tool === 'delete_repository' && e.decision === 'DENY'));
  expect(Date.now() - started).toBeLessThanOrEqual(2_000 + 500);
  const allowedEntry = entries.find((e) => e.tool === 'get_file_contents' && e.reason === 'No forbid policy matched')!;
  const deniedEntry = entries.find((e) => e.tool === 'delete_repository' && e.decision === 'DENY')!;
  expect(allowedEntry).toBeDefined();
  expect(deniedEntry).toBeDefined();

  expect(allowedEntry).toMatchObject({
    service: 'github',
    action: 'GithubMCP::Action::"get_file_contents"',
    resource: 'GithubMCP::Repository::"acme/api"',
    reason: 'No forbid policy matched',
    matchedPolicyIds: [],
    matchedPolicyNames: [],
    toolArgs: { owner: 'acme', repo: 'api', path: 'README.md' },
    user: p.ownerEmail,
    memberName: p.ownerEmail,
  });
  expect(deniedEntry).toMatchObject({
    service: 'github',
    action: 'GithubMCP::Action::"delete_repository"',
    resource: 'GithubMCP::Repository::"acme/api"',
    reason: DEMO_DENY_MESSAGE,
    matchedPolicyIds: [DEMO_POLICY_KEY],
    matchedPolicyNames: ['Block destructive GitHub tools'],
  });
  for (const e of [allowedEntry, deniedEntry]) {
    expect(e.principal).toBe(`Portcullis::Member::"${e.memberId}"`);
    expect(e.memberKeyId).toMatch(/^[0-9a-f-]{36}$/);
    expect(typeof e.durationMs).toBe('number');
    expect(e.durationMs).toBeGreaterThan(0);
    expect(e.sessionId).toMatch(/^[0-9a-f-]{36}$/);
    expect(e.callerIp).toMatch(/127\.0\.0\.1/);
    expect(Date.parse(e.timestamp)).not.toBeNaN();
  }
  // The key itself is never in an entry.
  expect(JSON.stringify(entries)).not.toContain(p.memberKey);

  // The demo owner's GitHub OAuth app is set up: connecting starts on the sandbox provider's consent page.
  const connect = await fetch(`${p.baseUrl}/api/agents/${allowedEntry.agentId}/connect/github`, { method: 'POST', headers: { cookie, origin: p.baseUrl } });
  expect(connect.status).toBe(200);
  const { authorizeUrl } = (await connect.json()) as { authorizeUrl: string };
  expect(new URL(authorizeUrl).pathname).toBe('/github/oauth/authorize');
  expect((await fetch(authorizeUrl)).status).toBe(200);
  return { allowedId: allowedEntry.id, deniedId: deniedEntry.id, cookie };
}

/**
 * Bad input on /mcp: clear errors, and nothing forwarded upstream. Refused requests write no
 * audit entry; calls of unknown tools are calls, audited as denied (decision 001).
 */
export async function exerciseBadMcpInput(p: ProductUnderTest, cookie: string, bodyLimitBytes: number) {
  const before = await auditEntriesUntil(p, cookie, () => true, 0);
  const post = (body: string, headers: Record<string, string> = {}) => fetch(`${p.baseUrl}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body,
  });
  const init = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });

  const noKey = await post(init);
  expect(noKey.status).toBe(401);
  expect(noKey.headers.get('www-authenticate')).toMatch(/^Bearer/);

  const wrongKey = await post(init, { authorization: 'Bearer pcm_' + 'A'.repeat(43) });
  expect(wrongKey.status).toBe(401);
  expect(wrongKey.headers.get('www-authenticate')).toMatch(/^Bearer/);

  const garbageKey = await post(init, { authorization: 'Bearer not-a-key' });
  expect(garbageKey.status).toBe(401);

  const auth = { authorization: `Bearer ${p.memberKey}` };
  const malformed = await post('{"jsonrpc": "2.0", "id": 1, "method": ', auth);
  expect(malformed.status).toBe(400);
  expect(((await malformed.json()) as { error: { code: number } }).error.code).toBe(-32700);

  const tooBig = await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { pad: 'x'.repeat(bodyLimitBytes + 10) } }), auth);
  expect(tooBig.status).toBe(413);

  // Unknown and unprefixed names give a clear JSON-RPC error through the SDK client, and an audit entry each.
  const unknown = ['github__no_such_tool', 'create_issue', 'nope__create_issue'];
  const { client, transport } = await connectMcp(p.baseUrl, p.memberKey);
  try {
    for (const name of unknown) {
      await expect(client.callTool({ name, arguments: {} })).rejects.toThrow(/Unknown tool/);
    }
  } finally {
    await transport.terminateSession().catch(() => undefined);
    await client.close();
  }
  // A prefix that names a connector files the entry under it (decision 071); other names stay as sent.
  const audited = [
    { service: 'github', tool: 'no_such_tool' }, { service: '', tool: 'create_issue' }, { service: '', tool: 'nope__create_issue' },
  ];
  const find = (es: ApiEntry[], t: { service: string; tool: string }) => es.find((e) => e.tool === t.tool && e.service === t.service && /^Unknown tool/.test(e.reason));
  await auditEntriesUntil(p, cookie, (es) => audited.every((t) => find(es, t)));
  // Give any stray entry time to arrive, then check only those three did.
  await new Promise((r) => setTimeout(r, 600));
  const after = await auditEntriesUntil(p, cookie, () => true, 0);
  expect(after.total).toBe(before.total + unknown.length);
  for (const t of audited) expect(find(after.entries, t)).toMatchObject({ decision: 'DENY' });
}

/** Every protocol version the official SDK supports can initialize, list and call. */
export async function exerciseProtocolVersions(p: ProductUnderTest) {
  const { SUPPORTED_PROTOCOL_VERSIONS } = await import('@modelcontextprotocol/sdk/types.js');
  expect(SUPPORTED_PROTOCOL_VERSIONS.length).toBeGreaterThanOrEqual(3);
  for (const version of SUPPORTED_PROTOCOL_VERSIONS) {
    const headers = { authorization: `Bearer ${p.memberKey}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const init = await fetch(`${p.baseUrl}/mcp`, {
      method: 'POST', headers,
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }),
    });
    expect(init.status).toBe(200);
    const sessionId = init.headers.get('mcp-session-id')!;
    expect(sessionId).toBeTruthy();
    expect(((await init.json()) as { result: { protocolVersion: string } }).result.protocolVersion).toBe(version);
    const session = { ...headers, 'mcp-session-id': sessionId, 'mcp-protocol-version': version };
    await fetch(`${p.baseUrl}/mcp`, { method: 'POST', headers: session, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
    const call = await fetch(`${p.baseUrl}/mcp`, {
      method: 'POST', headers: session,
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'github__get_me', arguments: {} } }),
    });
    expect(call.status).toBe(200);
    const result = ((await call.json()) as { result: { isError?: boolean; content: Array<{ text: string }> } }).result;
    expect(result.isError).toBeFalsy();
    expect(JSON.parse(result.content[0]!.text)).toMatchObject({ identity: { login: 'demo-user' } });
    const closed = await fetch(`${p.baseUrl}/mcp`, { method: 'DELETE', headers: session });
    expect(closed.status).toBe(200);
    const afterDelete = await fetch(`${p.baseUrl}/mcp`, {
      method: 'POST', headers: session, body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/list' }),
    });
    expect(afterDelete.status).toBe(404);
  }
}
