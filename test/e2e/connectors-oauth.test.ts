import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eq, sql } from 'drizzle-orm';
import { connectors, openSealed, prefixedToolName, schema, unwrapPrivateKey } from '@portcullis/core';
import { apiClient, signInThroughOutbox, type ApiClient } from '../support/api-client.ts';
import { connectMcp } from '../support/mcp-client.ts';
import { connectThroughConsent as connect, sandboxControl, submitConsent } from '../support/oauth-consent.ts';
import { startSplitTopology, type SplitTopology } from '../support/split-topology.ts';

const OWNER = 'conn-owner@example.com';
const MEMBER = 'conn-member@example.com';

/** What a tool result's first text block says, parsed. */
function payloadOf(result: object): any {
  const text = ((result as { content: Array<{ text: string }> }).content)[0]!.text;
  try { return JSON.parse(text); } catch { return text; }
}

describe('connectors: OAuth connections end to end (split processes, two gateways, sandbox OAuth servers)', () => {
  let t: SplitTopology;
  let owner: ApiClient;
  let member: ApiClient;
  let agentId: string;
  let memberId: string;
  let memberKey: string;
  let githubApp: { client_id: string; client_secret: string };
  /** Every response body and Location header the test saw, scanned for secrets at the end. */
  const seen: string[] = [];
  const callTool = async (gateway: string, name: string, args: Record<string, unknown> = {}) => {
    const { client, transport } = await connectMcp(gateway, memberKey);
    try {
      const result = await client.callTool({ name, arguments: args });
      seen.push(JSON.stringify(result));
      return result;
    } finally {
      await transport.terminateSession().catch(() => undefined);
      await client.close();
    }
  };
  const connectionRow = async (service: string) => (await t.database.db.select().from(schema.connections)
    .where(sql`${schema.connections.memberId} = ${memberId} and ${schema.connections.service} = ${service}`))[0];

  beforeAll(async () => {
    t = await startSplitTopology({ gatewayCount: 2, env: { LOG_LEVEL: 'info' } });
    const [g1, g2] = t.gateways as [string, string];
    owner = apiClient(g1, seen);
    member = apiClient(g2, seen);
    await signInThroughOutbox(owner, t.outboxDir, OWNER);
    const agent = await owner.call('POST', '/api/agents', { name: 'Connector agent' });
    agentId = agent.body.id;
    expect((await owner.call('PUT', `/api/agents/${agentId}/services`, { services: ['github', 'linear', 'slack'] })).status).toBe(200);
    const invite = await owner.call('POST', `/api/agents/${agentId}/invite`, { email: MEMBER });
    await signInThroughOutbox(member, t.outboxDir, MEMBER);
    memberId = (await member.call('POST', `/api/agents/${agentId}/join`, { token: invite.body.token })).body.memberId;
    expect((await owner.call('PUT', `/api/agents/${agentId}/members/${memberId}/status`, { status: 'approved' })).status).toBe(200);
  });
  afterAll(async () => { await t?.stop(); });

  it('refuses to connect before the member has a key, and an own_app connector before the owner set credentials (409, nothing stored)', async () => {
    const noKey = await member.call('POST', `/api/agents/${agentId}/connect/linear`);
    expect(noKey.status).toBe(409);
    expect(noKey.body.error).toMatchObject({ code: 'conflict', details: { reason: 'member_key_required' } });

    memberKey = (await member.call('PUT', `/api/agents/${agentId}/members/${memberId}/key`, {})).body.key;
    const noCredentials = await member.call('POST', `/api/agents/${agentId}/connect/github`);
    expect(noCredentials.status).toBe(409);
    expect(noCredentials.body.error).toMatchObject({ code: 'conflict', details: { reason: 'credentials_missing' } });
    expect(noCredentials.body.error.message).toMatch(/client ID and secret/);

    const notEnabled = await member.call('POST', `/api/agents/${agentId}/connect/stripe`);
    expect(notEnabled.status).toBe(409);
    expect(notEnabled.body.error.details.reason).toBe('service_not_enabled');
    expect(await t.database.db.select().from(schema.oauthFlows)).toHaveLength(0);
  });

  it('the owner sets GitHub app credentials; the member connects GitHub (own app) and Linear (dynamic registration)', async () => {
    githubApp = await sandboxControl(t.sandboxUrl, 'github/apps', { redirect_uris: [`${t.gateways[0]}/api/oauth/callback`, `${t.gateways[1]}/api/oauth/callback`], name: 'Acme Portcullis' });
    const set = await owner.call('PUT', `/api/agents/${agentId}/services/github/credentials`, { clientId: githubApp.client_id, clientSecret: githubApp.client_secret });
    expect(set.status).toBe(200);

    const githubLanding = await connect(member, agentId, 'github', 'alice');
    expect(githubLanding).toBe(`${t.gateways[1]}/agents/${agentId}/connectors?connected=github`);
    const linearLanding = await connect(member, agentId, 'linear', 'lin-member');
    expect(new URL(linearLanding).searchParams.get('connected')).toBe('linear');

    // Linear is managed: the gateway registered itself with the sandbox's authorization server.
    const registered = await t.database.db.select().from(schema.oauthClients);
    expect(registered.map((c) => c.service)).toEqual(['linear']);
    expect(await t.database.db.select().from(schema.oauthFlows)).toHaveLength(0);

    const connections = await member.call('GET', `/api/agents/${agentId}/members/${memberId}/connections`);
    expect(connections.status).toBe(200);
    const byService = Object.fromEntries((connections.body.connections as Array<{ service: string }>).map((c) => [c.service, c]));
    expect(byService.github).toMatchObject({ service: 'github', identityInfo: { login: 'alice' }, status: 'active' });
    expect(byService.linear).toMatchObject({ service: 'linear', identityInfo: { login: 'lin-member' }, status: 'active' });
    expect(connections.text).not.toMatch(/sbx_|sbr_|sealed|accessToken|refreshToken/);

    // The callback harvested the member's entities for the owner's policy pickers.
    const repos = await owner.call('GET', `/api/agents/${agentId}/entities/github/repositories?search=acme`);
    expect(repos.status).toBe(200);
    expect(repos.body.entities.map((e: { id: string }) => e.id)).toEqual(['acme/api', 'acme/infra', 'acme/web']);
    const teams = await owner.call('GET', `/api/agents/${agentId}/entities/linear/teams`);
    expect(teams.body.entities.map((e: { id: string }) => e.id)).toEqual(expect.arrayContaining(['team_eng', 'team_ops']));
  });

  it('entities can be harvested again on demand with the member key; without it, 401', async () => {
    const refresh = (key?: string) => fetch(`${t.gateways[0]}/api/agents/${agentId}/entities/linear/refresh`, {
      method: 'POST', headers: key ? { authorization: `Bearer ${key}` } : {},
    });
    const refreshed = await refresh(memberKey);
    expect(refreshed.status).toBe(200);
    const body = await refreshed.json() as { harvested: Record<string, number>; failed: Record<string, string> };
    expect(body.harvested.teams).toBeGreaterThanOrEqual(2);
    expect(body.failed).toEqual({});
    expect((await refresh()).status).toBe(401);
    expect((await refresh('pcm_' + 'x'.repeat(43))).status).toBe(401);
  });

  it('tools/list shows exactly the tools of enabled and connected connectors; calls reach the sandbox as the member', async () => {
    const { client, transport } = await connectMcp(t.gateways[0]!, memberKey);
    try {
      const { tools } = await client.listTools();
      const expected = connectors.filter((c) => c.key === 'github' || c.key === 'linear').flatMap((c) => c.tools.map((tool) => prefixedToolName(c.key, tool.name))).sort();
      expect(tools.map((tool) => tool.name).sort()).toEqual(expected);
    } finally {
      await transport.terminateSession().catch(() => undefined);
      await client.close();
    }
    const me = await callTool(t.gateways[0]!, 'github__get_me');
    expect(me.isError).toBeFalsy();
    expect(payloadOf(me).identity).toMatchObject({ login: 'alice' });
    const teams = await callTool(t.gateways[1]!, 'linear__list_teams');
    expect(payloadOf(teams).identity).toMatchObject({ login: 'lin-member' });
  });

  it('an access token that expires mid-session is refreshed transparently, once, even with calls racing on both replicas', async () => {
    const before = await connectionRow('github');
    const { client, transport } = await connectMcp(t.gateways[0]!, memberKey);
    const other = await connectMcp(t.gateways[1]!, memberKey);
    try {
      expect((await client.callTool({ name: 'github__get_me', arguments: {} })).isError).toBeFalsy();
      await sandboxControl(t.sandboxUrl, 'github/expire-tokens', { login: 'alice' });
      const results = await Promise.all([
        ...Array.from({ length: 4 }, () => client.callTool({ name: 'github__get_me', arguments: {} })),
        ...Array.from({ length: 4 }, () => other.client.callTool({ name: 'github__get_me', arguments: {} })),
      ]);
      for (const result of results) {
        expect(result.isError, JSON.stringify(result)).toBeFalsy();
        expect(payloadOf(result).identity.login).toBe('alice');
      }
    } finally {
      for (const session of [{ client, transport }, other]) {
        await session.transport.terminateSession().catch(() => undefined);
        await session.client.close();
      }
    }
    const after = await connectionRow('github');
    expect(after!.status).toBe('active');
    expect(after!.sealedTokens).not.toBe(before!.sealedTokens);
  });

  it('a revoked grant marks the connection needs_reauth and answers a tool error telling the member to reconnect; reconnecting restores it', async () => {
    await sandboxControl(t.sandboxUrl, 'linear/revoke-grants', { login: 'lin-member' });
    const refused = await callTool(t.gateways[0]!, 'linear__list_teams');
    expect(refused.isError).toBe(true);
    expect(payloadOf(refused)).toMatch(/Linear needs to be reconnected.*Reconnect Linear/);
    expect((await connectionRow('linear'))!.status).toBe('needs_reauth');
    const listed = await member.call('GET', `/api/agents/${agentId}/members/${memberId}/connections`);
    expect(listed.body.connections.find((c: { service: string }) => c.service === 'linear').status).toBe('needs_reauth');
    // The other replica learns of it too, without calling upstream.
    const again = await callTool(t.gateways[1]!, 'linear__list_teams');
    expect(payloadOf(again)).toMatch(/needs to be reconnected/);

    await connect(member, agentId, 'linear', 'lin-member');
    expect((await connectionRow('linear'))!.status).toBe('active');
    expect((await callTool(t.gateways[1]!, 'linear__list_teams')).isError).toBeFalsy();
  });

  it('bad input: unknown connector, forged, foreign or reused state, a callback without a flow → 4xx and nothing stored', async () => {
    const countRows = async () => ({
      connections: (await t.database.db.select().from(schema.connections)).length,
      flows: (await t.database.db.select().from(schema.oauthFlows)).length,
      credentials: (await t.database.db.select().from(schema.connectorCredentials)).length,
    });
    const before = await countRows();
    const unknown = await member.call('POST', `/api/agents/${agentId}/connect/myspace`);
    expect(unknown.status).toBe(400);
    expect(unknown.body.error.code).toBe('invalid_request');
    expect((await member.call('GET', '/api/oauth/callback?code=abc&state=forged')).status).toBe(400);
    expect((await member.call('GET', '/api/oauth/callback?code=abc')).status).toBe(400);
    expect((await member.call('GET', '/api/oauth/callback?state=only')).status).toBe(400);

    // A real state, used by someone else: refused, and the owner's own flow is untouched.
    const started = await member.call('POST', `/api/agents/${agentId}/connect/github`);
    const callback = await submitConsent(started.body.authorizeUrl, { login: 'alice' });
    const foreign = await owner.call('GET', callback);
    expect(foreign.status).toBe(400);
    expect(foreign.body.error.details).toMatchObject({ field: 'state' });
    expect((await member.call('GET', callback)).status).toBe(302);
    const reused = await member.call('GET', callback);
    expect(reused.status).toBe(400);
    expect(reused.body.error.message).toMatch(/already used/);

    // Malformed credentials are refused and store nothing.
    for (const body of [{}, { clientId: '' , clientSecret: 'x' }, { clientId: 'a', clientSecret: 'b', webhookSecret: 'w' }, { clientId: 'a', clientSecret: 7 }]) {
      const res = await owner.call('PUT', `/api/agents/${agentId}/services/github/credentials`, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
    }
    expect(await countRows()).toEqual(before);
    // The anonymous get 401 from both routes.
    const anonymous = apiClient(t.gateways[0]!);
    expect((await anonymous.call('POST', `/api/agents/${agentId}/connect/github`)).status).toBe(401);
    expect((await anonymous.call('GET', callback)).status).toBe(401);
  });

  it('vault: a dump of every table plus the server secret recovers no upstream token; rotation with currentKey keeps connections, without it reset-lost clears them', async () => {
    // The real tokens, read the legitimate way (with the member key), to know what to look for.
    const [memberRow] = await t.database.db.select().from(schema.members).where(eq(schema.members.id, memberId));
    const privateKey = unwrapPrivateKey(memberId, memberRow!.vaultWrappedPrivateKey!, memberKey);
    const rows = await t.database.db.select().from(schema.connections).where(eq(schema.connections.memberId, memberId));
    const secrets = rows.flatMap((r) => Object.values(JSON.parse(openSealed(privateKey, r.sealedTokens)) as Record<string, unknown>).filter((v): v is string => typeof v === 'string'));
    secrets.push(githubApp.client_secret, memberKey);
    expect(secrets.length).toBeGreaterThanOrEqual(6);

    const { recoverWithDumpAndSecret } = await import('../support/vault-attack.ts');
    const recovered = await recoverWithDumpAndSecret(t.database.db, t.serverSecret);
    for (const secret of secrets.slice(0, -2)) expect(recovered.join('\n')).not.toContain(secret);
    expect(recovered.join('\n')).toContain(githubApp.client_secret); // the secret opens what it should: owner app secrets
    expect(recovered.join('\n')).not.toContain(memberKey);

    // Rotation presenting the current key keeps the connections.
    const rotated = await member.call('PUT', `/api/agents/${agentId}/members/${memberId}/key`, { currentKey: memberKey });
    memberKey = rotated.body.key;
    expect((await callTool(t.gateways[0]!, 'github__get_me')).isError).toBeFalsy();
    // Rotation without it: connections can no longer be read; reset-lost clears them so the member can reconnect.
    memberKey = (await member.call('PUT', `/api/agents/${agentId}/members/${memberId}/key`, {})).body.key;
    const unreadable = await callTool(t.gateways[0]!, 'github__get_me');
    expect(unreadable.isError).toBe(true);
    expect(payloadOf(unreadable)).toMatch(/needs to be reconnected.*reset the lost key/);
    expect((await member.call('POST', `/api/agents/${agentId}/members/${memberId}/key/reset-lost`)).status).toBe(200);
    expect(await t.database.db.select().from(schema.connections).where(eq(schema.connections.memberId, memberId))).toHaveLength(0);
    await connect(member, agentId, 'github', 'alice');
    expect((await callTool(t.gateways[1]!, 'github__get_me')).isError).toBeFalsy();
  });

  it('secrets never appear in any response or log line', () => {
    const logs = Object.values(t.processes).map((p) => p.output()).join('\n');
    expect(logs).toMatch(/"outcome":"connected=github"/); // the logs do cover the flow
    const haystack = `${seen.join('\n')}\n${logs}`;
    expect(haystack).not.toContain(githubApp.client_secret);
    expect(haystack).not.toMatch(/sbx_[A-Za-z0-9_-]{20,}/);
    expect(logs).not.toMatch(/pcm_[A-Za-z0-9_-]{43}/);
    expect(logs).not.toMatch(/[?&]code=/);
  });

  it('an upstream that cannot be reached gives a clear error naming the connector, and the call is audited', async () => {
    await t.processes.sandbox!.stop();
    const { client, transport } = await connectMcp(t.gateways[0]!, memberKey);
    try {
      const failure = await client.callTool({ name: 'github__get_me', arguments: {} }).then(() => undefined, (err: Error) => err);
      expect(failure?.message).toMatch(/GitHub: The connector cannot be reached/);
    } finally {
      await transport.terminateSession().catch(() => undefined);
      await client.close();
    }
    const started = Date.now();
    for (;;) {
      const audit = await owner.call('GET', '/api/audit?service=github&tool=get_me');
      const failed = (audit.body.entries as Array<{ decision: string; reason: string }>).find((e) => /upstream error: The connector cannot be reached/.test(e.reason));
      if (failed) { expect(failed.decision).toBe('ALLOW'); break; }
      if (Date.now() - started > 5_000) throw new Error('the failed call was not audited');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  });
});
