import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectors, createNatsBus, openDatabase, schema, type Bus, type DatabaseHandle } from '@portcullis/core';
import { createTestDatabase, TEST_NATS_URL, uniqueSubjectPrefix, type TestDatabase } from '@portcullis/core/testing';
import { compilePolicyText } from '@portcullis/policy';
import { seedDemo, type DemoSeed } from '@portcullis/standalone';
import { freePort, startTs, type RunningProcess } from '../support/processes.ts';
import { addMember, sandboxTokenIssuer } from '../support/fixtures.ts';
import { connectMcp } from '../support/mcp-client.ts';
import { auditEntriesUntil, exerciseBadMcpInput, exerciseProtocolVersions, exerciseToolCallPath, type ProductUnderTest } from './tool-call-path.scenario.ts';

const BODY_LIMIT = 65_536;

describe('split mode: gateway, policy and audit as three processes on real NATS JetStream and Postgres', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'pc-split-'));
  const outboxDir = join(dataDir, 'outbox');
  const secret = randomBytes(32).toString('base64url');
  const prefix = uniqueSubjectPrefix('split');
  const processes: RunningProcess[] = [];
  let testDb: TestDatabase;
  let database: DatabaseHandle;
  let bus: Bus;
  let seed: DemoSeed;
  let p: ProductUnderTest;
  let sandboxUrl: string;

  beforeAll(async () => {
    testDb = await createTestDatabase('split');
    const [sandboxPort, policyPort, auditPort, gatewayPort] = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
    const shared = { NODE_ENV: 'development', PORTCULLIS_SECRET: secret, LOG_LEVEL: 'warn', NATS_URL: TEST_NATS_URL, NATS_SUBJECT_PREFIX: prefix };
    sandboxUrl = `http://127.0.0.1:${sandboxPort}`;

    const sandbox = startTs('services/sandbox/src/main.ts', { ...shared, SANDBOX_PORT: String(sandboxPort), DATA_DIR: join(dataDir, 'sandbox') }, 'sandbox');
    const policy = startTs('services/policy/src/main.ts', { ...shared, DATABASE_URL: testDb.url, GRPC_ADDRESS: `127.0.0.1:${policyPort}`, DATA_DIR: join(dataDir, 'policy') }, 'policy');
    const audit = startTs('services/audit/src/main.ts', { ...shared, GRPC_ADDRESS: `127.0.0.1:${auditPort}`, DATA_DIR: join(dataDir, 'audit') }, 'audit');
    processes.push(sandbox, policy, audit);
    await Promise.all([sandbox.waitFor(/sandbox listening/), policy.waitFor(/policy listening/), audit.waitFor(/audit listening/)]);

    const upstreams = Object.fromEntries(connectors.map((c) => [`UPSTREAM_${c.key.toUpperCase()}_URL`, `${sandboxUrl}/${c.key}/mcp`]));
    const gateway = startTs('services/gateway/src/main.ts', {
      ...shared, ...upstreams, DATABASE_URL: testDb.url, PORT: String(gatewayPort), DATA_DIR: join(dataDir, 'gateway'),
      POLICY_URL: `127.0.0.1:${policyPort}`, AUDIT_URL: `127.0.0.1:${auditPort}`, MAIL_URL: `file://${outboxDir}`, MCP_BODY_LIMIT_BYTES: String(BODY_LIMIT),
    }, 'gateway');
    processes.push(gateway);
    await gateway.waitFor(/gateway listening/);

    database = await openDatabase({ DATABASE_URL: testDb.url, DATA_DIR: dataDir });
    bus = await createNatsBus({ url: TEST_NATS_URL, subjectPrefix: prefix });
    seed = (await seedDemo(database.db, { issueToken: sandboxTokenIssuer(sandboxUrl), cedarOf: compilePolicyText }))!;
    p = { baseUrl: `http://127.0.0.1:${gatewayPort}`, memberKey: seed.memberKey, ownerEmail: seed.ownerEmail, outboxDir };
  });

  afterAll(async () => {
    for (const proc of processes.reverse()) await proc.stop();
    await bus?.close();
    await database?.close();
    await testDb?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  let cookie: string;
  it('serves the whole tool-call path: tools/list, allowed and denied calls, audit within 2 s', async () => {
    ({ cookie } = await exerciseToolCallPath(p));
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
});
