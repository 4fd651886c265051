import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createMemoryBus, NO_FORBID_MATCHED, openDatabase, PolicyDecisionService, schema,
  type AuthorizeRequest, type AuthorizeResponse, type Bus, type DatabaseHandle,
} from '@portcullis/core';
import { createTestDatabase, type TestDatabase } from '@portcullis/core/testing';
import { compilePolicyText, type PolicyRecordInput } from './engine/compile.ts';
import { startPolicyService, type PolicyService } from './policy-service.ts';

/** The decision point over real gRPC, real Postgres and the in-process bus. */

type Client = InstanceType<typeof PolicyDecisionService>;

function unary<Req, Res>(client: Client, method: string, request: Req): Promise<Res> {
  return new Promise((resolve, reject) => {
    (client[method] as (r: Req, cb: (err: grpc.ServiceError | null, res: Res) => void) => void)(request, (err, res) => (err ? reject(err) : resolve(res)));
  });
}

describe('policy service over gRPC', () => {
  let testDb: TestDatabase;
  let database: DatabaseHandle;
  let bus: Bus;
  let service: PolicyService;
  let client: Client;
  const dataDir = mkdtempSync(join(tmpdir(), 'pc-policy-'));
  let agentId: string;
  let policyId: string;
  let versionId: string;
  const member = { id: '11111111-1111-4111-8111-111111111111', role: 'member', status: 'approved', email: 'alice@example.com' };

  const record: PolicyRecordInput = {
    policyKey: 'no-destructive-github',
    name: 'No destructive GitHub',
    service: 'github',
    effect: 'forbid',
    tools: [],
    tiers: ['destructive'],
    principal: { type: 'all_members' },
    denyMessage: 'Destructive GitHub tools are blocked for this agent',
    enabled: true,
  };

  const authorize = (overrides: Partial<AuthorizeRequest> = {}) => unary<Partial<AuthorizeRequest>, AuthorizeResponse>(client, 'Authorize', {
    agentId, member, service: 'github', tool: 'delete_repository', toolArgsJson: '{"owner":"acme","repo":"api"}', policyVersion: 1, ...overrides,
  });

  /** Writes a change the way the gateway does: rows first, then the agent's version. */
  async function changePolicy(set: Partial<typeof schema.policies.$inferInsert>, policyVersion: number) {
    await database.db.update(schema.policies).set(set).where(eq(schema.policies.id, policyId));
    await database.db.update(schema.agents).set({ policyVersion }).where(eq(schema.agents.id, agentId));
  }

  const tick = () => new Promise((resolve) => setImmediate(resolve));

  beforeAll(async () => {
    testDb = await createTestDatabase('policy_service');
    database = await openDatabase({ DATABASE_URL: testDb.url, DATA_DIR: dataDir });
    const [agent] = await database.db.insert(schema.agents).values({ name: 'Agent', policyVersion: 1 }).returning();
    agentId = agent!.id;
    const [policy] = await database.db.insert(schema.policies).values({ agentId, ...record, conditions: {} }).returning();
    policyId = policy!.id;
    const [version] = await database.db.insert(schema.policyVersions).values({
      agentId, policyId, version: 1, change: 'create', snapshot: { ...record }, cedar: compilePolicyText(record),
    }).returning();
    versionId = version!.id;
    await database.db.update(schema.policies).set({ currentVersionId: versionId }).where(eq(schema.policies.id, policyId));

    bus = createMemoryBus();
    service = await startPolicyService({ GRPC_ADDRESS: '127.0.0.1:0' }, { db: database.db, bus });
    client = new PolicyDecisionService(service.address, grpc.credentials.createInsecure());
  });

  afterAll(async () => {
    client?.close();
    await service?.close();
    await bus?.close();
    await database?.close();
    await testDb?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('denies a call a forbid policy matches, with its deny message and the ids audit needs', async () => {
    const verdict = await authorize();
    expect(verdict).toEqual({
      decision: 'DENY',
      reason: 'Destructive GitHub tools are blocked for this agent',
      matchedPolicyKeys: ['no-destructive-github'],
      matchedPolicyNames: ['No destructive GitHub'],
      matchedPolicyIds: [policyId],
      policyVersionIds: [versionId],
      principal: `Portcullis::Member::"${member.id}"`,
      action: 'GithubMCP::Action::"delete_repository"',
      resource: 'GithubMCP::Repository::"acme/api"',
      policyVersion: 1,
      // No shadow policy on the agent: the wire's empty defaults (decision 061).
      shadowDecision: '', shadowPolicyKeys: [], shadowPolicyIds: [], approvalPolicyKeys: [], approvalPolicyIds: [], approvalPolicyVersionIds: [],
    });
  });

  it('allows a call no forbid matches', async () => {
    const verdict = await authorize({ tool: 'get_me', toolArgsJson: '' });
    expect(verdict.decision).toBe('ALLOW');
    expect(verdict.reason).toBe(NO_FORBID_MATCHED);
    expect(verdict.matchedPolicyKeys).toEqual([]);
  });

  it('denies a pending member whatever the tool', async () => {
    const verdict = await authorize({ tool: 'get_me', member: { ...member, status: 'pending' } });
    expect(verdict.decision).toBe('DENY');
    expect(verdict.reason).toBe('Member is pending approval');
  });

  it('applies a policy change announced on the bus', async () => {
    await changePolicy({ denyMessage: 'Changed by the owner' }, 2);
    expect((await authorize({ policyVersion: 0 })).reason).toBe('Destructive GitHub tools are blocked for this agent'); // cached until told
    bus.publishChange({ kind: 'policy.changed', agentId, policyVersion: 2 });
    await tick();
    const verdict = await authorize({ policyVersion: 0 });
    expect(verdict.reason).toBe('Changed by the owner');
    expect(verdict.policyVersion).toBe(2);
  });

  it('reloads when a request carries a newer policy version, even without an event', async () => {
    await changePolicy({ tiers: ['read'], denyMessage: 'Reads are blocked now' }, 3);
    // A caller that has not seen version 3 is served from the cache: no database read.
    expect((await authorize({ policyVersion: 2 })).decision).toBe('DENY');
    const verdict = await authorize({ policyVersion: 3 });
    expect(verdict.decision).toBe('ALLOW');
    expect(verdict.policyVersion).toBe(3);
    const read = await authorize({ tool: 'get_me', policyVersion: 3 });
    expect(read.reason).toBe('Reads are blocked now');
  });

  it('stops applying a disabled policy once told', async () => {
    await changePolicy({ enabled: false }, 4);
    bus.publishChange({ kind: 'policy.changed', agentId, policyVersion: 4 });
    await tick();
    expect((await authorize({ tool: 'get_me', policyVersion: 4 })).decision).toBe('ALLOW');
  });

  it('denies every call of an agent disabled after an agent.changed event', async () => {
    await database.db.update(schema.agents).set({ status: 'disabled' }).where(eq(schema.agents.id, agentId));
    bus.publishChange({ kind: 'agent.changed', agentId });
    await tick();
    const verdict = await authorize({ tool: 'get_me', policyVersion: 4 });
    expect(verdict.decision).toBe('DENY');
    expect(verdict.reason).toBe('Denied: the agent is disabled');
    await database.db.update(schema.agents).set({ status: 'active' }).where(eq(schema.agents.id, agentId));
    bus.publishChange({ kind: 'agent.changed', agentId });
    await tick();
    expect((await authorize({ tool: 'get_me', policyVersion: 4 })).decision).toBe('ALLOW');
  });

  it('denies calls of an unknown agent', async () => {
    for (const unknown of ['22222222-2222-4222-8222-222222222222', 'not-a-uuid']) {
      const verdict = await authorize({ agentId: unknown });
      expect(verdict.decision).toBe('DENY');
      expect(verdict.reason).toBe('Denied: unknown agent');
    }
  });

  it('refuses a malformed request with INVALID_ARGUMENT naming the field', async () => {
    await expect(authorize({ member: undefined })).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT, details: 'member.id is required' });
    await expect(authorize({ toolArgsJson: '[1]' })).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT, details: 'tool_args_json must be a JSON object' });
  });

  it('previews a draft and refuses what the catalog does not know', async () => {
    const ok = await unary<object, { cedar: string; errors: string[] }>(client, 'Preview', { agentId, draftJson: JSON.stringify({ name: 'x', policyKey: 'x', service: 'slack', effect: 'forbid', tools: ['slack_send_message'], principal: { type: 'all_members' } }) });
    expect(ok.errors).toEqual([]);
    expect(ok.cedar).toContain('action == SlackMCP::Action::"slack_send_message"');
    const bad = await unary<object, { cedar: string; errors: string[] }>(client, 'Preview', { agentId, draftJson: JSON.stringify({ name: 'x', service: 'slack', effect: 'forbid', tools: ['nope'], principal: { type: 'all_members' } }) });
    expect(bad.errors).toEqual(['unknown tool "nope" for service "slack"']);
  });

  it('answers Simulate with UNAVAILABLE when no audit service is configured, INVALID_ARGUMENT for a bad draft', async () => {
    const draftJson = JSON.stringify({ ...record, policyKey: undefined, tiers: [], tools: ['get_me'] });
    await expect(unary(client, 'Simulate', { agentId, draftJson })).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE, details: expect.stringContaining('AUDIT_URL') });
    await expect(unary(client, 'Simulate', { agentId, draftJson: '{}' })).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT, details: expect.stringContaining('the draft has errors') });
  });
});
