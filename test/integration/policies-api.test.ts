import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eq } from 'drizzle-orm';
import { connectors, schema, type AuditEntry } from '@portcullis/core';
import { startPolicyService, type PolicyService } from '@portcullis/policy';
import { loadAuditConfig, startAuditService, type AuditService } from '@portcullis/audit';
import { createApiHarness, signInRoleActors, type ApiHarness, type RoleActors } from '@portcullis/gateway/testing';
import { freePort } from '../support/processes.ts';

/**
 * The policies API with a real PDP (Preview compiles every saved record; Simulate) and a real
 * audit service (trigger counts from ClickHouse via chDB), both over gRPC on loopback, sharing
 * the harness's Postgres database and in-process bus.
 */

let h: ApiHarness;
let roles: RoleActors;
let owner: string;
let pdp: PolicyService;
let audit: AuditService;
let dataDir: string;

beforeAll(async () => {
  const [policyPort, auditPort] = await Promise.all([freePort(), freePort()]);
  dataDir = mkdtempSync(join(tmpdir(), 'pc-policies-api-'));
  h = await createApiHarness({ POLICY_URL: `127.0.0.1:${policyPort}`, AUDIT_URL: `127.0.0.1:${auditPort}` });
  pdp = await startPolicyService({ GRPC_ADDRESS: `127.0.0.1:${policyPort}`, AUDIT_URL: `127.0.0.1:${auditPort}` }, { db: h.db, bus: h.bus });
  audit = await startAuditService(loadAuditConfig({ NODE_ENV: 'test', DATA_DIR: dataDir, GRPC_ADDRESS: `127.0.0.1:${auditPort}` }), { bus: h.bus, log: () => undefined });
  roles = await signInRoleActors(h, 'polint');
  owner = roles.cookieOf.owner!;
});
afterAll(async () => {
  await h?.close();
  await pdp?.close();
  await audit?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const settle = () => new Promise((r) => setTimeout(r, 0));
type Policy = Record<string, unknown> & { id: string; policyKey: string; version: number; enabled: boolean };
type Version = { id: string; version: number; change: string; snapshot: Record<string, unknown>; cedar: string; author: { email: string } | null };

const body = (over: Record<string, unknown> = {}) => ({ name: 'No repo deletes', service: 'github', effect: 'forbid', tools: ['delete_repository'], principal: { type: 'all_members' }, denyMessage: 'Ask an admin', ...over });

async function create(agentId: string, payload: Record<string, unknown>): Promise<Policy> {
  const res = await h.request({ method: 'POST', url: `/api/agents/${agentId}/policies`, payload, cookie: owner });
  expect(res.statusCode, res.body).toBe(201);
  return res.json() as Policy;
}

async function versions(agentId: string, policyId: string): Promise<Version[]> {
  const res = await h.request({ method: 'GET', url: `/api/agents/${agentId}/policies/${policyId}/versions`, cookie: owner });
  expect(res.statusCode, res.body).toBe(200);
  return (res.json() as { versions: Version[] }).versions;
}

async function policyVersionOf(agentId: string): Promise<number> {
  return (await h.db.select({ v: schema.agents.policyVersion }).from(schema.agents).where(eq(schema.agents.id, agentId)))[0]!.v;
}

async function countRows(agentId: string) {
  const policies = await h.db.select({ id: schema.policies.id }).from(schema.policies).where(eq(schema.policies.agentId, agentId));
  const history = await h.db.select({ id: schema.policyVersions.id }).from(schema.policyVersions).where(eq(schema.policyVersions.agentId, agentId));
  return { policies: policies.length, versions: history.length, policyVersion: await policyVersionOf(agentId) };
}

/** A connector with no tool of `tier`: a tier-only policy on it names no tool, which does not compile. */
const serviceWithout = (tier: string) => connectors.find((c) => !c.tools.some((t) => t.tier === tier))?.key;

describe('create, update, toggle, delete, restore through the PDP', () => {
  it('creates: key derived from the name (unique), Cedar from the PDP in version 1, policy_version bumped, policy.changed published', async () => {
    const agentId = await roles.agentWithMembers({ name: 'Lifecycle' });
    const first = await create(agentId, body());
    expect(first).toMatchObject({
      policyKey: 'no-repo-deletes', name: 'No repo deletes', service: 'github', effect: 'forbid', tools: ['delete_repository'], tiers: [],
      principal: { type: 'all_members' }, conditions: {}, denyMessage: 'Ask an admin', enabled: true, version: 1, triggerCount: 0, lastTriggered: null,
    });
    const second = await create(agentId, body());
    expect(second.policyKey).toBe('no-repo-deletes-2');
    await settle();
    expect(h.events).toContainEqual({ kind: 'policy.changed', agentId, policyVersion: 1 });
    expect(h.events).toContainEqual({ kind: 'policy.changed', agentId, policyVersion: 2 });
    const [v1] = await versions(agentId, first.id);
    expect(v1).toMatchObject({ version: 1, change: 'create', author: { email: roles.email.owner }, snapshot: { policyKey: 'no-repo-deletes', tools: ['delete_repository'] } });
    expect(v1!.cedar).toContain('@id("no-repo-deletes")');
    expect(v1!.cedar).toContain('forbid');
    expect(v1!.cedar).toContain('delete_repository');
  });

  it('updates (an omitted policyKey and enabled keep theirs), toggles both ways, deletes and restores with history', async () => {
    const agentId = await roles.agentWithMembers({ name: 'Edits' });
    const made = await create(agentId, body({ policyKey: 'guard' }));
    const toggled = await h.request({ method: 'POST', url: `/api/policies/${made.id}/toggle`, cookie: owner });
    expect(toggled.json()).toMatchObject({ enabled: false, version: 2 });

    const put = await h.request({ method: 'PUT', url: `/api/agents/${agentId}/policies/${made.id}`, payload: body({ name: 'Guard, wider', tools: [], tiers: ['destructive'] }), cookie: owner });
    expect(put.statusCode, put.body).toBe(200);
    expect(put.json()).toMatchObject({ policyKey: 'guard', name: 'Guard, wider', tiers: ['destructive'], enabled: false, version: 3 });
    const again = await h.request({ method: 'POST', url: `/api/agents/${agentId}/policies/${made.id}/toggle`, cookie: owner });
    expect(again.json()).toMatchObject({ enabled: true, version: 4 });

    let history = await versions(agentId, made.id);
    expect(history.map((v) => v.change)).toEqual(['toggle', 'update', 'toggle', 'create']);
    expect(history[1]!.cedar).not.toEqual(history[3]!.cedar);
    expect(history[0]!.cedar).toEqual(history[1]!.cedar);

    // Restore version 1: a new version (5) whose content equals version 1's.
    const v1 = history[3]!;
    const restored = await h.request({ method: 'POST', url: `/api/agents/${agentId}/policies/${made.id}/versions/${v1.id}/restore`, cookie: owner });
    expect(restored.statusCode, restored.body).toBe(200);
    expect(restored.json()).toMatchObject({ id: made.id, name: 'No repo deletes', tools: ['delete_repository'], tiers: [], enabled: true, version: 5 });
    history = await versions(agentId, made.id);
    expect(history[0]).toMatchObject({ version: 5, change: 'restore', snapshot: v1.snapshot, cedar: v1.cedar });

    const deleted = await h.request({ method: 'DELETE', url: `/api/agents/${agentId}/policies/${made.id}`, cookie: owner });
    expect(deleted.statusCode).toBe(204);
    history = await versions(agentId, made.id);
    expect(history[0]).toMatchObject({ version: 6, change: 'delete' });

    // Restoring a deleted policy recreates it under its old id, unless its key was taken meanwhile.
    const squatter = await create(agentId, body({ policyKey: 'guard', name: 'Squatter' }));
    const before = await countRows(agentId);
    const refused = await h.request({ method: 'POST', url: `/api/agents/${agentId}/policies/${made.id}/versions/${v1.id}/restore`, cookie: owner });
    expect(refused.statusCode, refused.body).toBe(409);
    expect(await countRows(agentId)).toEqual(before);
    expect((await h.request({ method: 'DELETE', url: `/api/agents/${agentId}/policies/${squatter.id}`, cookie: owner })).statusCode).toBe(204);
    const back = await h.request({ method: 'POST', url: `/api/agents/${agentId}/policies/${made.id}/versions/${v1.id}/restore`, cookie: owner });
    expect(back.statusCode, back.body).toBe(200);
    expect(back.json()).toMatchObject({ id: made.id, policyKey: 'guard', version: 7 });
    expect((await versions(agentId, made.id)).map((v) => v.version)).toEqual([7, 6, 5, 4, 3, 2, 1]);
    // 7 versions of this policy + the squatter's create and delete.
    expect(await policyVersionOf(agentId)).toBe(9);
  });

  it('refuses a record that does not compile with 400 listing the PDP\'s errors; nothing changes', async () => {
    const service = serviceWithout('destructive');
    expect(service, 'a connector without destructive tools').toBeDefined();
    const agentId = await roles.agentWithMembers({ name: 'Compile errors' });
    const before = await countRows(agentId);
    const res = await h.request({ method: 'POST', url: `/api/agents/${agentId}/policies`, payload: body({ service, tools: [], tiers: ['destructive'] }), cookie: owner });
    expect(res.statusCode, res.body).toBe(400);
    const error = (res.json() as { error: { code: string; details: { field: string; errors: string[] } } }).error;
    expect(error.code).toBe('invalid_request');
    expect(error.details.errors.length).toBeGreaterThan(0);
    expect(await countRows(agentId)).toEqual(before);
  });
});

describe('preview and simulate', () => {
  it('preview answers Cedar for a good draft and errors (200) for one that does not compile', async () => {
    const agentId = await roles.agentWithMembers({ name: 'Preview' });
    const good = await h.request({ method: 'POST', url: `/api/agents/${agentId}/policies/preview`, payload: body({ policyKey: 'draft-key' }), cookie: owner });
    expect(good.statusCode, good.body).toBe(200);
    expect(good.json()).toMatchObject({ errors: [], cedar: expect.stringContaining('@id("draft-key")') });
    const bad = await h.request({ method: 'POST', url: `/api/agents/${agentId}/policies/preview`, payload: body({ service: serviceWithout('destructive'), tools: [], tiers: ['destructive'], principal: { type: 'members', ids: [randomUUID()] } }), cookie: owner });
    expect(bad.statusCode, bad.body).toBe(200);
    const { errors } = bad.json() as { errors: string[] };
    expect(errors.some((e) => e.startsWith('principal.ids.0:'))).toBe(true);
    expect(errors.length).toBeGreaterThan(1);
    expect(await countRows(agentId)).toEqual({ policies: 0, versions: 0, policyVersion: 0 });
  });

  it('simulate proxies the PDP: its answer, or 503 when the PDP does not serve Simulate', async () => {
    const agentId = await roles.agentWithMembers({ name: 'Simulate' });
    const res = await h.request({ method: 'POST', url: `/api/agents/${agentId}/policies/simulate`, payload: { draft: body(), limit: 50 }, cookie: owner });
    expect([200, 503], res.body).toContain(res.statusCode);
    if (res.statusCode === 200) expect(res.json()).toMatchObject({ evaluated: expect.any(Number), unchanged: expect.any(Number), allowToDeny: expect.any(Number), denyToAllow: expect.any(Number), samples: expect.any(Array) });
    else expect(res.json()).toMatchObject({ error: { code: 'unavailable' } });
  });
});

describe('simulation samples (issue 18, item 8)', () => {
  it('carry each changed entry\'s time, member and tool besides its id and verdicts', async () => {
    const agentId = await roles.agentWithMembers({ name: 'Sampled' });
    const memberOfAgent = (await h.db.select().from(schema.members).where(eq(schema.members.agentId, agentId))).find((m) => m.email === roles.email.member)!;
    const timestamp = new Date(Date.now() - 60 * 60_000).toISOString();
    const entry: AuditEntry = {
      id: randomUUID(), timestamp, agentId, agentName: 'Sampled', memberId: memberOfAgent.id, memberName: roles.email.member, memberKeyId: randomUUID(),
      service: 'github', tool: 'delete_repository', action: 'GithubMCP::Action::"delete_repository"', resource: 'GithubMCP::Service::"github"',
      callerIp: '127.0.0.1', toolArgs: {}, decision: 'ALLOW', reason: 'No forbid policy matched', matchedPolicyIds: [], matchedPolicyNames: [],
      policyVersionIds: [], policyDbIds: [], durationMs: 1, principal: `Portcullis::Member::"${memberOfAgent.id}"`,
    };
    await audit.store.insert([entry]);
    const res = await h.request({ method: 'POST', url: `/api/agents/${agentId}/policies/simulate`, payload: { draft: body() }, cookie: owner });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ evaluated: 1, allowToDeny: 1 });
    expect((res.json() as { samples: unknown[] }).samples).toEqual([{
      entryId: entry.id, before: 'ALLOW', after: 'DENY', reason: 'Ask an admin',
      timestamp, memberId: memberOfAgent.id, memberName: roles.email.member, service: 'github', tool: 'delete_repository',
    }]);
  });
});

describe('trigger counts from the audit service', () => {
  it('lists each policy\'s triggerCount and lastTriggered, one audit call per page', async () => {
    const agentId = await roles.agentWithMembers({ name: 'Triggers' });
    const hot = await create(agentId, body({ policyKey: 'hot' }));
    await create(agentId, body({ policyKey: 'cold' }));
    const entry = (timestamp: string): AuditEntry => ({
      id: randomUUID(), timestamp, agentId, agentName: 'Triggers', memberId: randomUUID(), memberName: 'm@example.com', memberKeyId: randomUUID(),
      service: 'github', tool: 'delete_repository', action: 'GithubMCP::Action::"delete_repository"', resource: 'GithubMCP::Service::"github"',
      callerIp: '127.0.0.1', toolArgs: {}, decision: 'DENY', reason: 'Ask an admin', matchedPolicyIds: ['hot'], matchedPolicyNames: ['No repo deletes'],
      policyVersionIds: [randomUUID()], policyDbIds: [hot.id], durationMs: 1, principal: 'Portcullis::Member::"x"',
    });
    await audit.store.insert([entry('2026-03-01T10:00:00.000Z'), entry('2026-03-02T11:30:00.000Z')]);
    const res = await h.request({ method: 'GET', url: `/api/agents/${agentId}/policies?sortBy=policyKey&sortDir=asc`, cookie: owner });
    expect(res.statusCode, res.body).toBe(200);
    expect((res.json() as { policies: Policy[] }).policies.map((p) => [p.policyKey, p.triggerCount, p.lastTriggered])).toEqual([
      ['cold', 0, null],
      ['hot', 2, '2026-03-02T11:30:00.000Z'],
    ]);
  });
});
