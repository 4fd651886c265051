import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient, signInThroughOutbox, type ApiClient } from '../support/api-client.ts';
import { addMember, sandboxTokenIssuer } from '../support/fixtures.ts';
import { connectMcp } from '../support/mcp-client.ts';
import { freePort } from '../support/processes.ts';
import { sinkReceiver } from '../support/sink-receiver.ts';
import { startSplitTopology, type SplitTopology } from '../support/split-topology.ts';

/**
 * Issue 20, audit sinks: split processes on real NATS JetStream, Postgres and chDB; calls
 * through the official MCP SDK client; the sinks are real HTTP servers in this test — a
 * webhook receiver that verifies the HMAC signature as a customer's would, and an OTLP/HTTP
 * receiver that parses `/v1/logs` requests.
 */
const WEBHOOK_SECRET = 'e2e-webhook-secret-3b9d1c7a';
const OTLP_KEY = 'e2e-otlp-api-key-51ac09e2';

type CallResult = { isError?: boolean };
interface ApiEntry { id: string; tool: string; memberId: string; reason: string }

async function until<T>(what: string, ms: number, probe: () => Promise<T | undefined> | T | undefined): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await Promise.resolve().then(probe).catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('audit sinks: a webhook down for a burst of calls, and an OTLP collector', () => {
  let t: SplitTopology;
  let owner: ApiClient;
  let member: ApiClient;
  let agentId: string;
  let memberKey: string;
  let memberId: string;
  let webhook: ReturnType<typeof sinkReceiver>;
  let otlp: Server;
  const otlpRecords: Array<{ attributes: Record<string, unknown>; severityText: string; timeUnixNano: string }> = [];
  const otlpApiKeys: string[] = [];

  beforeAll(async () => {
    webhook = sinkReceiver(await freePort(), WEBHOOK_SECRET);
    await webhook.start();
    otlp = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => { body += c; });
      req.on('end', () => {
        if (req.url !== '/v1/logs' || req.headers['content-type'] !== 'application/json') { res.writeHead(404).end(); return; }
        otlpApiKeys.push(String(req.headers['x-api-key']));
        const request = JSON.parse(body) as { resourceLogs: Array<{ scopeLogs: Array<{ logRecords: Array<{ attributes: Array<{ key: string; value: Record<string, unknown> }>; severityText: string; timeUnixNano: string }> }> }> };
        for (const rl of request.resourceLogs) for (const sl of rl.scopeLogs) for (const r of sl.logRecords) {
          otlpRecords.push({ ...r, attributes: Object.fromEntries(r.attributes.map((a) => [a.key, Object.values(a.value)[0]])) });
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    const otlpPort = await freePort();
    await new Promise<void>((resolve) => otlp.listen(otlpPort, '127.0.0.1', resolve));

    // Retries at most a second apart, so the sink catches up within seconds of coming back.
    t = await startSplitTopology({ gatewayCount: 1, env: { AUDIT_SINK_RETRY_MAX_MS: '1000' } });
    owner = apiClient(t.gateways[0]!);
    await signInThroughOutbox(owner, t.outboxDir, 'sink-owner@example.com');
    agentId = (await owner.call('POST', '/api/agents', { name: 'Streamed agent' })).body.id as string;
    expect((await owner.call('PUT', `/api/agents/${agentId}/services`, { services: ['github'] })).status).toBe(200);
    const issue = sandboxTokenIssuer(t.sandboxUrl);
    ({ memberKey, memberId } = await addMember(t.database.db, {
      agentId, email: 'sink-member@example.com', status: 'approved', connect: { github: await issue('github', { login: 'dana', name: 'Dana' }) },
    }));
    member = apiClient(t.gateways[0]!);
    await signInThroughOutbox(member, t.outboxDir, 'sink-member@example.com');

    const hook = await owner.call('POST', `/api/agents/${agentId}/sinks`, { kind: 'webhook', name: 'SIEM webhook', url: webhook.url, secret: WEBHOOK_SECRET });
    expect(hook.status, hook.text).toBe(201);
    const collector = await owner.call('POST', `/api/agents/${agentId}/sinks`, { kind: 'otlp', name: 'Collector', url: `http://127.0.0.1:${otlpPort}`, headers: { 'x-api-key': OTLP_KEY } });
    expect(collector.status, collector.text).toBe(201);
  });
  afterAll(async () => {
    await t?.stop();
    await webhook?.kill().catch(() => undefined);
    otlp?.closeAllConnections();
    otlp?.close();
  });

  const sinksList = async () => {
    const res = await owner.call('GET', `/api/agents/${agentId}/sinks`);
    expect(res.status).toBe(200);
    return res.body.sinks as Array<{ name: string; lag: number | null; lastError: string | null; lastErrorAt: string | null; lastDeliveredAt: string | null }>;
  };

  it('delivers every entry exactly once, in one request at a time, after being killed for a burst of 300 /mcp calls', async () => {
    const sessions = await Promise.all(Array.from({ length: 4 }, () => connectMcp(t.gateways[0]!, memberKey)));
    const callMany = async (count: number) => {
      let next = 0;
      let failed = 0;
      await Promise.all(sessions.map(async ({ client }) => {
        while (next < count) {
          next += 1;
          if (((await client.callTool({ name: 'github__get_me', arguments: {} })) as CallResult).isError) failed += 1;
        }
      }));
      expect(failed).toBe(0);
    };

    await callMany(20);
    await until('the first 20 entries at the webhook', 30_000, () => (webhook.deliveries.size >= 20 ? true : undefined));

    await webhook.kill();
    await callMany(300);
    // While it is down the list says so: entries wait (lag) and the last error names the refusal.
    const down = await until('a lag and an error for the webhook', 30_000, async () => {
      const sink = (await sinksList()).find((s) => s.name === 'SIEM webhook')!;
      return sink.lag! > 0 && sink.lastError ? sink : undefined;
    });
    expect(down.lastError).toMatch(/could not reach the sink/);
    expect(Date.parse(down.lastErrorAt!)).toBeGreaterThan(Date.now() - 60_000);

    await webhook.start();
    await until('all 320 entries at the webhook', 60_000, () => (webhook.deliveries.size >= 320 ? true : undefined));
    for (const { client, transport } of sessions) {
      await transport.terminateSession().catch(() => undefined);
      await client.close();
    }

    // Exactly once per id, every one of the member's audit entries, in the owner's /api/audit shape.
    const audit = await until('320 entries in the audit log', 30_000, async () => {
      const page = await owner.call('GET', `/api/audit?member=${memberId}&limit=500`);
      return page.body.total === 320 ? page.body.entries as ApiEntry[] : undefined;
    });
    expect([...webhook.deliveries.values()].every((n) => n === 1)).toBe(true);
    expect(new Set(webhook.deliveries.keys())).toEqual(new Set(audit.map((e) => e.id)));
    for (const entry of audit) expect(webhook.entries.get(entry.id)).toEqual(entry);
    expect(webhook.overlapped).toBe(false);
    expect(webhook.refusedSignatures).toBe(0);

    await until('the webhook\'s lag back to 0', 30_000, async () => ((await sinksList()).find((s) => s.name === 'SIEM webhook')!.lag === 0 ? true : undefined));

    // The OTLP collector was up all along: one log record per entry, with the entry's fields as attributes.
    await until('320 OTLP log records', 30_000, () => (new Set(otlpRecords.map((r) => r.attributes['portcullis.audit.id'])).size >= 320 ? true : undefined));
    const one = otlpRecords.find((r) => r.attributes['portcullis.audit.id'] === audit[0]!.id)!;
    expect(one.attributes).toMatchObject({
      'portcullis.agent.id': agentId, 'portcullis.agent.name': 'Streamed agent', 'portcullis.member.id': memberId, 'portcullis.member.name': 'sink-member@example.com',
      'portcullis.service': 'github', 'portcullis.tool': 'get_me', 'portcullis.decision': 'ALLOW', 'portcullis.tool_args': '{}',
    });
    expect(one.severityText).toBe('INFO');
    expect(otlpApiKeys.every((k) => k === OTLP_KEY)).toBe(true);
  });

  it('secrets never appear in an answer or a log line, and only the owner sees or changes the sinks', async () => {
    const list = await owner.call('GET', `/api/agents/${agentId}/sinks`);
    expect(list.text).not.toContain(WEBHOOK_SECRET);
    expect(list.text).not.toContain(OTLP_KEY);
    expect((await member.call('GET', `/api/agents/${agentId}/sinks`)).status).toBe(403);
    expect((await member.call('POST', `/api/agents/${agentId}/sinks`, { kind: 'webhook', name: 'x', url: 'https://evil.example.com', secret: 'x'.repeat(20) })).status).toBe(403);
    const stranger = apiClient(t.gateways[0]!);
    await signInThroughOutbox(stranger, t.outboxDir, 'sink-stranger@example.com');
    expect((await stranger.call('GET', `/api/agents/${agentId}/sinks`)).status).toBe(404);
    for (const [name, proc] of Object.entries(t.processes)) {
      const output = proc.output();
      expect(output, name).not.toContain(WEBHOOK_SECRET);
      expect(output, name).not.toContain(OTLP_KEY);
    }
  });
});
