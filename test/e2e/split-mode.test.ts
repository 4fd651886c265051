import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema, sealWithSecret } from '@portcullis/core';
import { CLIENT_SECRET_LABEL } from '@portcullis/gateway';
import { compilePolicyText } from '@portcullis/policy';
import { seedDemo, type DemoSeed } from '@portcullis/standalone';
import { addMember, sandboxAppRegistrar, sandboxTokenIssuer } from '../support/fixtures.ts';
import { connectMcp, connectMcpDirect } from '../support/mcp-client.ts';
import { startSplitTopology, type SplitTopology } from '../support/split-topology.ts';
import { auditEntriesUntil, exerciseBadMcpInput, exerciseProtocolVersions, exerciseToolCallPath, type ProductUnderTest } from './tool-call-path.scenario.ts';

const BODY_LIMIT = 65_536;

describe('split mode: gateway, policy and audit as three processes on real NATS JetStream and Postgres', () => {
  let topology: SplitTopology;
  let seed: DemoSeed;
  let p: ProductUnderTest;
  let sandboxUrl: string;
  let database: SplitTopology['database'];
  let bus: SplitTopology['bus'];

  beforeAll(async () => {
    topology = await startSplitTopology({ env: { MCP_BODY_LIMIT_BYTES: String(BODY_LIMIT) } });
    ({ sandboxUrl, database, bus } = topology);
    seed = (await seedDemo(database.db, {
      issueToken: sandboxTokenIssuer(sandboxUrl),
      cedarOf: compilePolicyText,
      registerApp: sandboxAppRegistrar(sandboxUrl, `${topology.gateways[0]}/api/oauth/callback`),
      sealClientSecret: (secret) => sealWithSecret(topology.serverSecret, CLIENT_SECRET_LABEL, secret),
    }))!;
    p = { baseUrl: topology.gateways[0]!, memberKey: seed.memberKey, ownerEmail: seed.ownerEmail, outboxDir: topology.outboxDir };
  });

  afterAll(async () => {
    await topology?.stop();
  });

  let cookie: string;
  it('serves the whole tool-call path: tools/list, allowed and denied calls, audit within 2 s', async () => {
    ({ cookie } = await exerciseToolCallPath(p));
  });

  it('exposes Prometheus metrics on every service: calls and decisions, authorize latency, audit writes and lag', async () => {
    const scrape = async (name: string) => {
      const res = await fetch(topology.metrics[name]!);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/text\/plain/);
      return res.text();
    };
    const value = (text: string, series: string) => Number(new RegExp(`^${series.replace(/[{}"]/g, (c) => `\\${c}`)} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
    const gateway = await scrape('gateway0');
    expect(value(gateway, 'portcullis_gateway_tool_calls_total{service="github",decision="ALLOW"}')).toBeGreaterThanOrEqual(1);
    expect(value(gateway, 'portcullis_gateway_tool_calls_total{service="github",decision="DENY"}')).toBeGreaterThanOrEqual(1);
    expect(value(gateway, 'portcullis_gateway_authorize_duration_seconds_count')).toBeGreaterThanOrEqual(2);
    expect(gateway).toMatch(/^portcullis_gateway_tool_call_duration_seconds_bucket\{le="0.001",decision="ALLOW"\} \d+$/m);
    const policy = await scrape('policy');
    expect(value(policy, 'portcullis_policy_decisions_total{decision="ALLOW"}')).toBeGreaterThanOrEqual(1);
    expect(value(policy, 'portcullis_policy_decisions_total{decision="DENY"}')).toBeGreaterThanOrEqual(1);
    const audit = await scrape('audit');
    expect(value(audit, 'portcullis_audit_entries_written_total')).toBeGreaterThanOrEqual(3);
    expect(value(audit, 'portcullis_audit_lag_seconds_count')).toBeGreaterThanOrEqual(3);
    expect(value(audit, 'portcullis_audit_batch_size_count')).toBeGreaterThanOrEqual(1);
    for (const text of [gateway, policy, audit]) expect(text).not.toMatch(/pcm_|member_id|agent_id/);
  });

  it('answers bad /mcp input with clear errors and forwards nothing', async () => {
    await exerciseBadMcpInput(p, cookie, BODY_LIMIT);
  });

  it('speaks every MCP protocol version the official SDK supports, with sessions and DELETE', async () => {
    await exerciseProtocolVersions(p);
  });

  it('denies a pending member\'s calls and audits them', async () => {
    const token = await sandboxTokenIssuer(sandboxUrl)('github', { login: 'pat', name: 'Pat' });
    const pending = await addMember(database.db, { agentId: seed.agentId, email: 'pat@example.com', status: 'pending', connect: { github: token } });
    const { client, transport } = await connectMcp(p.baseUrl, pending.memberKey);
    const result = await client.callTool({ name: 'github__get_me', arguments: {} });
    expect(result.isError).toBe(true);
    expect((result.content as Array<{ text: string }>)[0]!.text).toMatch(/pending/i);
    await transport.terminateSession().catch(() => undefined);
    await client.close();
    const { entries } = await auditEntriesUntil(p, cookie, (es) => es.some((e) => e.memberId === pending.memberId));
    const entry = entries.find((e) => e.memberId === pending.memberId);
    expect(entry).toMatchObject({ decision: 'DENY', tool: 'get_me', memberKeyId: pending.keyId });
  });

  it('answers 403 to every /mcp call of a disabled agent, audits it, and serves it again once re-enabled', async () => {
    const { client, transport } = await connectMcp(p.baseUrl, p.memberKey);
    await database.db.update(schema.agents).set({ status: 'disabled' }).where(eq(schema.agents.id, seed.agentId));
    bus.publishChange({ kind: 'agent.changed', agentId: seed.agentId });
    await new Promise((r) => setTimeout(r, 300));

    await expect(client.callTool({ name: 'github__get_me', arguments: {} })).rejects.toThrow(/403|disabled/i);
    const raw = await fetch(`${p.baseUrl}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${p.memberKey}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }),
    });
    expect(raw.status).toBe(403);
    const { entries } = await auditEntriesUntil(p, cookie, (es) => es.filter((e) => e.reason === 'Agent is disabled').length >= 2);
    const refused = entries.filter((e) => e.reason === 'Agent is disabled');
    expect(refused.length).toBeGreaterThanOrEqual(2);
    expect(refused.every((e) => e.decision === 'DENY')).toBe(true);
    expect(refused.some((e) => e.tool === 'get_me' && e.service === 'github')).toBe(true);

    await database.db.update(schema.agents).set({ status: 'active' }).where(eq(schema.agents.id, seed.agentId));
    bus.publishChange({ kind: 'agent.changed', agentId: seed.agentId });
    await new Promise((r) => setTimeout(r, 300));
    const again = await connectMcp(p.baseUrl, p.memberKey);
    const ok = await again.client.callTool({ name: 'github__get_me', arguments: {} });
    expect(ok.isError).toBeFalsy();
    await again.transport.terminateSession().catch(() => undefined);
    await again.client.close();
    await transport.terminateSession().catch(() => undefined);
    await client.close();
  });

  it('counts calls in the home overview as the stats do, and in the audit histogram exactly what GET /api/audit lists, protocol requests of the disabled agent listed but not calls (decisions 037, 071)', async () => {
    const get = async <T>(path: string): Promise<T> => {
      const res = await fetch(`${p.baseUrl}${path}`, { headers: { cookie, origin: p.baseUrl } });
      expect(res.status, path).toBe(200);
      return res.json() as Promise<T>;
    };
    type Series = { buckets: Array<{ calls: number; denies: number }> };
    const sum = (s: Series) => s.buckets.reduce((n, b) => ({ calls: n.calls + b.calls, denies: n.denies + b.denies }), { calls: 0, denies: 0 });
    const from = new Date(Date.now() - 3_600_000).toISOString();
    // Entries arrive through NATS: read until two reads of the list agree around the overview's.
    let settled = false;
    for (let attempt = 0; attempt < 20 && !settled; attempt++) {
      const listed = async () => ({
        calls: (await get<{ total: number }>(`/api/audit?limit=1&from=${from}`)).total,
        denies: (await get<{ total: number }>(`/api/audit?limit=1&result=DENY&from=${from}`)).total,
      });
      const before = await listed();
      const overview = await get<{ series: Series; totals: { calls: number; denies: number } }>(`/api/dashboard/overview?from=${from}`);
      const stats = await get<{ calls: number; denied: number }>(`/api/dashboard/stats?from=${from}`);
      const histogram = await get<Series>(`/api/audit/histogram?from=${from}`);
      const after = await listed();
      if (JSON.stringify(before) !== JSON.stringify(after)) { await new Promise((r) => setTimeout(r, 250)); continue; }
      // One definition of a call (decision 071): the overview and the stats agree.
      expect(overview.totals).toEqual({ calls: stats.calls, denies: stats.denied });
      expect(sum(overview.series)).toEqual(overview.totals);
      expect(sum(histogram)).toEqual(after);
      // The disabled agent's initialize: listed (and in the histogram), not a call.
      const protocol = (await get<{ total: number }>(`/api/audit?limit=1&tool=initialize&from=${from}`)).total;
      expect(protocol).toBeGreaterThanOrEqual(1);
      expect(sum(await get<Series>(`/api/audit/histogram?tool=initialize&from=${from}`)).calls).toBe(protocol);
      expect(after.calls - overview.totals.calls).toBeGreaterThanOrEqual(protocol);
      settled = true;
    }
    expect(settled).toBe(true);
  });

  it('reports dependency health; with the policy service down, /api/status is 503 and calls are denied, never forwarded', async () => {
    const healthy = await fetch(`${p.baseUrl}/api/status`);
    expect(healthy.status).toBe(200);
    expect(await healthy.json()).toMatchObject({ status: 'ok', dependencies: { database: { status: 'up' }, bus: { status: 'up' }, policy: { status: 'up' }, audit: { status: 'up' } } });

    expect(await topology.processes.policy!.stop('SIGKILL')).toBe(null);
    const degraded = await fetch(`${p.baseUrl}/api/status`);
    expect(degraded.status).toBe(503);
    expect(await degraded.json()).toMatchObject({ status: 'degraded', dependencies: { policy: { status: 'down' } } });

    const { client, transport } = await connectMcp(p.baseUrl, p.memberKey);
    const result = await client.callTool({ name: 'github__issue_write', arguments: { method: 'create', owner: 'acme', repo: 'api', title: 'must not be created' } });
    expect(result.isError).toBe(true);
    expect((result.content as Array<{ text: string }>)[0]!.text).toMatch(/policy service unavailable/i);
    await transport.terminateSession().catch(() => undefined);
    await client.close();
    const { entries } = await auditEntriesUntil(p, cookie, (es) => es.some((e) => e.tool === 'issue_write'));
    expect(entries.find((e) => e.tool === 'issue_write')).toMatchObject({ decision: 'DENY' });
    // Nothing reached the upstream: the sandbox has no issue titled so.
    const token = await sandboxTokenIssuer(sandboxUrl)('github', { login: 'demo-user', name: 'Demo User' });
    const direct = await connectMcpDirect(`${sandboxUrl}/github/mcp`, token);
    const issues = await direct.callTool({ name: 'list_issues', arguments: { owner: 'acme', repo: 'api' } });
    expect(JSON.stringify(issues.content)).not.toContain('must not be created');
    await direct.close();
  });
});
