import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generate } from 'otplib';
import { eq } from 'drizzle-orm';
import { schema, sealToMember } from '@portcullis/core';
import { latestMailTo } from '../support/dashboard-session.ts';
import { apiClient, signInThroughOutbox } from '../support/api-client.ts';
import { sandboxTokenIssuer } from '../support/fixtures.ts';
import { connectMcp } from '../support/mcp-client.ts';
import { startSplitTopology, type SplitTopology } from '../support/split-topology.ts';

const OWNER = 'owner@example.com';
const INVITEE = 'invitee@example.com';

async function mcpCall(baseUrl: string, key: string, name: string) {
  const { client, transport } = await connectMcp(baseUrl, key);
  try {
    return await client.callTool({ name, arguments: {} });
  } finally {
    await transport.terminateSession().catch(() => undefined);
    await client.close();
  }
}

async function mcpStatus(baseUrl: string, key: string): Promise<number> {
  const res = await fetch(`${baseUrl}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'probe', version: '1' } } }),
  });
  await res.body?.cancel();
  return res.status;
}

/** Polls until `probe` answers `expected`, returning how long it took. */
async function within(ms: number, probe: () => Promise<number>, expected: number): Promise<number> {
  const started = Date.now();
  for (;;) {
    if ((await probe()) === expected) return Date.now() - started;
    if (Date.now() - started > ms) throw new Error(`not ${expected} within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('control plane journey through the HTTP API alone (two gateway replicas)', () => {
  let t: SplitTopology;
  beforeAll(async () => { t = await startSplitTopology({ gatewayCount: 2 }); });
  afterAll(async () => { await t?.stop(); });

  it('owner enrols MFA, creates an agent and invites; the invitee joins, is approved, keys up, calls; removal revokes the key within 1 s', async () => {
    const [g1, g2] = t.gateways as [string, string];
    const owner = apiClient(g1);
    await signInThroughOutbox(owner, t.outboxDir, OWNER);

    // MFA enrolment with a real TOTP code.
    const setup = await owner.call('POST', '/api/auth/mfa/setup');
    expect(setup.status).toBe(200);
    expect(setup.body.otpauthUrl).toMatch(/^otpauth:\/\/totp\//);
    const enrolled = await owner.call('POST', '/api/auth/mfa/verify-setup', { code: await generate({ secret: setup.body.secret }) });
    expect(enrolled.status).toBe(200);
    expect(enrolled.body.backupCodes).toHaveLength(10);

    const agent = await owner.call('POST', '/api/agents', { name: 'Journey agent', tags: ['e2e'] });
    expect(agent.status).toBe(201);
    const agentId = agent.body.id as string;
    expect((await owner.call('PUT', `/api/agents/${agentId}/services`, { services: ['github'] })).status).toBe(200);

    const invite = await owner.call('POST', `/api/agents/${agentId}/invite`, { email: INVITEE });
    expect(invite.status).toBe(201);
    expect(latestMailTo(t.outboxDir, INVITEE).link ?? latestMailTo(t.outboxDir, INVITEE).subject).toBeTruthy();

    // The invitee signs in (on the other replica), joins, and is pending.
    const invitee = apiClient(g2);
    await signInThroughOutbox(invitee, t.outboxDir, INVITEE);
    const joined = await invitee.call('POST', `/api/agents/${agentId}/join`, { token: invite.body.token });
    expect(joined.status).toBe(200);
    expect(joined.body.status).toBe('pending');
    const memberId = joined.body.memberId as string;

    // A pending member's key works for /mcp, but its calls are DENY.
    const pendingKey = await invitee.call('PUT', `/api/agents/${agentId}/members/${memberId}/key`, {});
    expect(pendingKey.status).toBe(200);
    const [member] = await t.database.db.select().from(schema.members).where(eq(schema.members.id, memberId));
    const token = await sandboxTokenIssuer(t.sandboxUrl)('github', { login: 'invitee', name: 'Invitee' });
    // Stands in for the OAuth connect flow (issue 4): a connection sealed to the member's vault.
    await t.database.db.insert(schema.connections).values({
      memberId, service: 'github', identityInfo: { login: 'invitee' }, sealedTokens: sealToMember(member!.vaultPublicKey!, JSON.stringify({ accessToken: token })),
    });
    const denied = await mcpCall(g1, pendingKey.body.key, 'github__get_me');
    expect(denied.isError).toBe(true);

    // Approved: the owner approves; the member rotates its key (keeping its connection) and calls.
    expect((await owner.call('PUT', `/api/agents/${agentId}/members/${memberId}/status`, { status: 'approved' })).status).toBe(200);
    const key = await invitee.call('PUT', `/api/agents/${agentId}/members/${memberId}/key`, { currentKey: pendingKey.body.key });
    expect(key.status).toBe(200);
    expect(key.body.key).toMatch(/^pcm_[A-Za-z0-9_-]{43}$/);
    expect(await mcpStatus(g1, pendingKey.body.key)).toBe(401); // the old key is revoked
    const ok = await mcpCall(g2, key.body.key, 'github__get_me');
    expect(ok.isError).toBeFalsy();
    expect(JSON.parse((ok.content as Array<{ text: string }>)[0]!.text)).toMatchObject({ identity: { login: 'invitee' } });

    // Warm both replicas' caches with the key, then remove the member: 401 everywhere within 1 s.
    expect(await mcpStatus(g1, key.body.key)).toBe(200);
    expect(await mcpStatus(g2, key.body.key)).toBe(200);
    expect((await owner.call('DELETE', `/api/agents/${agentId}/members/${memberId}`)).status).toBe(204);
    const [a, b] = await Promise.all([within(1_000, () => mcpStatus(g1, key.body.key), 401), within(1_000, () => mcpStatus(g2, key.body.key), 401)]);
    expect(Math.max(a, b)).toBeLessThanOrEqual(1_000);
  });

  it('disabling an agent makes its next /mcp call 403 on every replica within 1 s; re-enabling serves it again; keys survive', async () => {
    const [g1, g2] = t.gateways as [string, string];
    const owner = apiClient(g1);
    const email = 'owner2@example.com';
    await signInThroughOutbox(owner, t.outboxDir, email);
    const agent = await owner.call('POST', '/api/agents', { name: 'Toggle agent' });
    const agentId = agent.body.id as string;
    const detail = await owner.call('GET', `/api/agents/${agentId}`);
    const memberId = detail.body.membership.id as string;
    const key = (await owner.call('PUT', `/api/agents/${agentId}/members/${memberId}/key`, {})).body.key as string;
    expect(await mcpStatus(g1, key)).toBe(200);
    expect(await mcpStatus(g2, key)).toBe(200);

    expect((await owner.call('PUT', `/api/agents/${agentId}/status`, { status: 'disabled' })).status).toBe(200);
    const [a, b] = await Promise.all([within(1_000, () => mcpStatus(g1, key), 403), within(1_000, () => mcpStatus(g2, key), 403)]);
    expect(Math.max(a, b)).toBeLessThanOrEqual(1_000);

    expect((await owner.call('PUT', `/api/agents/${agentId}/status`, { status: 'active' })).status).toBe(200);
    await within(1_000, () => mcpStatus(g1, key), 200);
    await within(1_000, () => mcpStatus(g2, key), 200);
  });
});
