import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { and, eq } from 'drizzle-orm';
import { isConnectorKey, isProtocolRequest, schema, type AuditEntry } from '@portcullis/core';
import { createApiHarness, type ApiHarness } from '../testing/api-harness.ts';

/**
 * What an audit entry names for requests that reach no tool (issue 30 item 2, decision 071),
 * on the real gateway and Postgres, entries read off the in-process bus as the audit writer
 * gets them: the connector a tool name's prefix names, `<Label>MCP::Action::"<tool>"`, and
 * the proxy's own `Portcullis::Action` for what names no connector.
 */
let h: ApiHarness;
const audited: AuditEntry[] = [];

beforeAll(async () => {
  h = await createApiHarness();
  h.bus.onAuditEntry((entry) => audited.push(entry));
});
afterAll(async () => { await h?.close(); });

const HEADERS = { accept: 'application/json, text/event-stream', 'content-type': 'application/json' };

/** A fresh agent whose owner holds a member key. */
async function agentWithKey(prefix: string): Promise<{ agentId: string; key: string; cookie: string; memberId: string }> {
  const cookie = await h.signIn(`${prefix}-owner@example.com`);
  const agentId = (await h.request({ method: 'POST', url: '/api/agents', payload: { name: prefix }, cookie })).json().id as string;
  const [member] = await h.db.select().from(schema.members).where(and(eq(schema.members.agentId, agentId), eq(schema.members.email, `${prefix}-owner@example.com`)));
  const res = await h.request({ method: 'PUT', url: `/api/agents/${agentId}/members/${member!.id}/key`, payload: {}, cookie });
  expect(res.statusCode, res.body).toBe(200);
  return { agentId, key: res.json().key as string, cookie, memberId: member!.id };
}

const mcp = (key: string, payload: unknown, sessionId?: string, method: 'POST' | 'GET' | 'DELETE' = 'POST') => h.app.inject({
  method, url: '/mcp',
  headers: { authorization: `Bearer ${key}`, ...HEADERS, ...(sessionId ? { 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-06-18' } : {}) },
  ...(payload === undefined ? {} : { payload: payload as object }),
});
const INIT = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'audit-targets', version: '1' } } };
const call = (id: number, name: string) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: { channel_id: 'C123' } } });

const entriesOf = (agentId: string) => audited.filter((e) => e.agentId === agentId);

describe('audit entries of requests that reach no tool', () => {
  it('an unknown tool whose prefix names a connector is filed under that connector, with its Cedar action', async () => {
    const { agentId, key } = await agentWithKey('targets-prefix');
    const sessionId = (await mcp(key, INIT)).headers['mcp-session-id'] as string;
    const longTool = `github__${'x'.repeat(5_000)}`;
    for (const [i, name] of ['slack__list_channels_typo', 'github__no_such_tool', longTool].entries()) {
      const res = await mcp(key, call(10 + i, name), sessionId);
      expect(res.json().error).toMatchObject({ code: -32602, message: expect.stringContaining('Unknown tool') });
    }
    await expect.poll(() => entriesOf(agentId).length).toBe(3);
    const [slack, github, long] = entriesOf(agentId);
    expect(slack).toMatchObject({
      service: 'slack', tool: 'list_channels_typo', action: 'SlackMCP::Action::"list_channels_typo"', resource: 'SlackMCP::Channel::"C123"',
      decision: 'DENY', reason: 'Unknown tool "slack__list_channels_typo". Tool names are <service>__<tool>, exactly as tools/list shows them.',
      matchedPolicyIds: [], sessionId,
    });
    expect(github).toMatchObject({ service: 'github', tool: 'no_such_tool', action: 'GithubMCP::Action::"no_such_tool"', resource: 'GithubMCP::Service::"github"' });
    expect(long!.tool).toBe('x'.repeat(200));
    for (const entry of [slack, github, long]) expect(isProtocolRequest(entry!.action)).toBe(false);
  });

  it('a tool name that names no connector: no service, the name as sent, the proxy\'s own tools/call action; still a call', async () => {
    const { agentId, key } = await agentWithKey('targets-none');
    const sessionId = (await mcp(key, INIT)).headers['mcp-session-id'] as string;
    for (const [i, name] of ['nope__x', 'get_me', 'initialize'].entries()) {
      expect((await mcp(key, call(20 + i, name), sessionId)).json().error.code).toBe(-32602);
    }
    await expect.poll(() => entriesOf(agentId).length).toBe(3);
    for (const [i, name] of ['nope__x', 'get_me', 'initialize'].entries()) {
      const entry = entriesOf(agentId)[i]!;
      expect(entry).toMatchObject({ service: '', tool: name, action: 'Portcullis::Action::"tools/call"', resource: `Portcullis::Agent::"${agentId}"`, decision: 'DENY' });
      // A call named like a protocol method is still a call.
      expect(isProtocolRequest(entry.action)).toBe(false);
    }
  });

  it('a disabled agent\'s protocol requests name no service (no pseudo-service `mcp`); its tool calls name their connector', async () => {
    const { agentId, key, cookie } = await agentWithKey('targets-disabled');
    const sessionId = (await mcp(key, INIT)).headers['mcp-session-id'] as string;
    expect((await h.request({ method: 'PUT', url: `/api/agents/${agentId}/status`, payload: { status: 'disabled' }, cookie })).statusCode).toBe(200);
    const answers = [
      await mcp(key, INIT),
      await mcp(key, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, sessionId),
      await mcp(key, undefined, sessionId, 'DELETE'),
      await mcp(key, call(3, 'github__get_me'), sessionId),
      await mcp(key, call(4, 'slack__list_channels_typo'), sessionId),
    ];
    expect(answers.map((a) => a.statusCode)).toEqual([403, 403, 403, 403, 403]);
    await expect.poll(() => entriesOf(agentId).filter((e) => e.reason === 'Agent is disabled').length).toBe(5);
    const refused = entriesOf(agentId).filter((e) => e.reason === 'Agent is disabled');
    const protocol = refused.filter((e) => isProtocolRequest(e.action));
    expect(protocol.map((e) => e.tool)).toEqual(['initialize', 'tools/list', 'HTTP DELETE']);
    for (const entry of protocol) {
      expect(entry).toMatchObject({ service: '', action: `Portcullis::Action::${JSON.stringify(entry.tool)}`, resource: `Portcullis::Agent::"${agentId}"`, decision: 'DENY' });
    }
    expect(refused.map((e) => e.service)).not.toContain('mcp');
    expect(isConnectorKey('mcp')).toBe(false);
    expect(refused.find((e) => e.tool === 'get_me')).toMatchObject({ service: 'github', action: 'GithubMCP::Action::"get_me"' });
    expect(refused.find((e) => e.tool === 'list_channels_typo')).toMatchObject({ service: 'slack', action: 'SlackMCP::Action::"list_channels_typo"' });
  });
});
