import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { and, eq } from 'drizzle-orm';
import { schema, type AuditEntry } from '@portcullis/core';
import { createApiHarness, type ApiHarness } from '../testing/api-harness.ts';

/**
 * `/mcp`'s quotas (issue 29 part 3, decision 069) on the real gateway and Postgres: calls per
 * member key and per agent, failed authentications per client address. Requests are
 * `initialize` and `ping`, which the gateway answers itself (no policy service needed).
 */
let h: ApiHarness;
const audited: AuditEntry[] = [];

beforeAll(async () => {
  h = await createApiHarness({
    MCP_RATE_PER_KEY: '0.01', MCP_RATE_BURST_PER_KEY: '3',
    MCP_RATE_PER_AGENT: '0.01', MCP_RATE_BURST_PER_AGENT: '5',
    MCP_AUTH_FAILURES_PER_IP_PER_MINUTE: '4', MCP_RATE_PENALTY_MS: '0',
  });
  h.bus.onAuditEntry((entry) => audited.push(entry));
});
afterAll(async () => { await h?.close(); });

/** A fresh agent whose owner holds a member key; `extra` more members with keys of their own. */
async function agentWithKeys(prefix: string, extra = 0): Promise<{ agentId: string; keys: string[] }> {
  const cookie = await h.signIn(`${prefix}-owner@example.com`);
  const agentId = (await h.request({ method: 'POST', url: '/api/agents', payload: { name: prefix }, cookie })).json().id as string;
  const emails = Array.from({ length: extra }, (_, i) => `${prefix}-m${i}@example.com`);
  const cookies = [cookie];
  for (const email of emails) {
    cookies.push(await h.signIn(email));
    const [user] = await h.db.select().from(schema.users).where(eq(schema.users.email, email));
    await h.db.insert(schema.members).values({ agentId, userId: user!.id, email, role: 'member', status: 'approved' });
  }
  const keys: string[] = [];
  for (const [i, email] of [`${prefix}-owner@example.com`, ...emails].entries()) {
    const [member] = await h.db.select().from(schema.members).where(and(eq(schema.members.agentId, agentId), eq(schema.members.email, email)));
    const res = await h.request({ method: 'PUT', url: `/api/agents/${agentId}/members/${member!.id}/key`, payload: {}, cookie: cookies[i]! });
    expect(res.statusCode).toBe(200);
    keys.push(res.json().key as string);
  }
  return { agentId, keys };
}

const initialize = (key: string, id = 1) => h.app.inject({
  method: 'POST', url: '/mcp',
  headers: { authorization: `Bearer ${key}`, accept: 'application/json, text/event-stream', 'content-type': 'application/json' },
  payload: { jsonrpc: '2.0', id, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'quota-test', version: '1' } } },
});

describe('/mcp quotas', () => {
  it('refuses a member key over its rate with 429, Retry-After and a JSON-RPC error, and audits a DENY with the reason', async () => {
    const { agentId, keys: [key] } = await agentWithKeys('quota-key');
    for (let i = 0; i < 3; i++) expect((await initialize(key!, i)).statusCode).toBe(200);
    const refused = await initialize(key!, 42);
    expect(refused.statusCode).toBe(429);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    const body = refused.json();
    expect(body.id).toBe(42);
    expect(body.error.code).toBe(-32029);
    expect(body.error.message).toMatch(/Rate limited: more than 0\.01 requests a second .* for this member key; retry after \d+ s/);
    expect(body.error.data.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    await expect.poll(() => audited.filter((e) => e.agentId === agentId && e.decision === 'DENY').length).toBe(1);
    const entry = audited.find((e) => e.agentId === agentId && e.decision === 'DENY')!;
    expect(entry.reason).toBe(body.error.message);
    expect(entry.tool).toBe('initialize');
  });

  it('counts every request of a batch', async () => {
    const { keys: [key] } = await agentWithKeys('quota-batch');
    expect((await initialize(key!)).statusCode).toBe(200);
    const sessionId = (await initialize(key!)).headers['mcp-session-id'] as string;
    const batch = await h.app.inject({
      method: 'POST', url: '/mcp',
      headers: { authorization: `Bearer ${key}`, accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'mcp-session-id': sessionId },
      payload: [{ jsonrpc: '2.0', id: 1, method: 'ping' }, { jsonrpc: '2.0', id: 2, method: 'ping' }],
    });
    // Two of the burst of three are spent: a batch of two does not fit in the one left.
    expect(batch.statusCode).toBe(429);
    expect((await initialize(key!)).statusCode).toBe(200);
  });

  it('holds all the keys of one agent to the agent\'s rate', async () => {
    const { keys } = await agentWithKeys('quota-agent', 2);
    const answers = [];
    for (const key of keys) for (let i = 0; i < 2; i++) answers.push((await initialize(key)).statusCode);
    // Three keys of burst 3 each, but the agent's burst is 5: the sixth request is refused.
    expect(answers).toEqual([200, 200, 200, 200, 200, 429]);
    const refused = await initialize(keys[2]!);
    expect(refused.json().error.message).toMatch(/for this agent/);
  });

  it('refuses an address that keeps presenting bad keys before any key is looked up, valid ones included', async () => {
    const { keys: [key] } = await agentWithKeys('quota-ip');
    const bad = `pcm_${'A'.repeat(43)}`;
    for (let i = 0; i < 4; i++) expect((await initialize(bad)).statusCode).toBe(401);
    const blocked = await initialize(bad);
    expect(blocked.statusCode).toBe(429);
    expect(blocked.json().error.message).toMatch(/failed authentications .* for this client address/);
    expect(Number(blocked.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect((await initialize(key!)).statusCode).toBe(429);
    // Requests without any credential are the OAuth discovery step, not a guess: still 401.
    const anonymous = await h.app.inject({ method: 'POST', url: '/mcp', headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json' }, payload: {} });
    expect(anonymous.statusCode).toBe(401);
  });
});
