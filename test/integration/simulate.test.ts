/**
 * Simulate end to end inside one process: the real decision point (gRPC, Postgres) reading
 * past calls from the real audit service (gRPC, chDB), entries seeded through its store.
 * Every expected count is computed here from the seeded entries, not read from the service.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryBus, openDatabase, PolicyDecisionService, schema, type AuditEntry, type Bus, type DatabaseHandle } from '@portcullis/core';
import { createTestDatabase, type TestDatabase } from '@portcullis/core/testing';
import { loadAuditConfig, startAuditService, type AuditService } from '@portcullis/audit';
import { startPolicyService, type PolicyService } from '@portcullis/policy';
import { makeEntry } from '../../services/audit/src/testing/audit-entries.ts';
import { freePort } from '../support/processes.ts';

type Client = InstanceType<typeof PolicyDecisionService>;
type Decision = 'ALLOW' | 'DENY';

interface SimulateResponse {
  evaluated: number; unchanged: number; allowToDeny: number; denyToAllow: number; skipped: number; from: string; to: string;
  samples: Array<{ entryId: string; before: Decision; after: Decision; reason: string; timestamp: string; memberId: string; memberName: string; service: string; tool: string }>;
}

const NOW = Date.now();
const MINUTE = 60_000;
const DAY = 86_400_000;
const TOOLS = ['get_me', 'issue_write', 'delete_repository', 'list_issues', 'add_issue_comment'] as const;

describe('Simulate over the real audit service', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'pc-simulate-'));
  let testDb: TestDatabase;
  let database: DatabaseHandle;
  let bus: Bus;
  let audit: AuditService;
  let policy: PolicyService;
  let client: Client;
  let agentId: string;
  let otherAgentPolicyId: string;
  let noDeleteId: string;
  let disabledId: string;
  const member: Record<'alice' | 'bob' | 'carol', { id: string; status: string }> = {} as never;
  const ghost = '0195f0a0-0000-7000-8000-0000000dead0';
  let entries: AuditEntry[] = [];

  const call = (request: Record<string, unknown>, target: Client = client) => new Promise<SimulateResponse>((resolve, reject) => {
    target.Simulate!({ agentId, ...request }, (err: grpc.ServiceError | null, res: SimulateResponse) => (err ? reject(err) : resolve(res)));
  });
  const draft = (over: Record<string, unknown> = {}) => JSON.stringify({
    name: 'No issue writes', service: 'github', effect: 'forbid', tools: ['issue_write'], principal: { type: 'all_members' },
    denyMessage: 'Issue writes are off', ...over,
  });

  /** The entries the service should replay: policy decisions of members the agent still has. */
  const replayable = (list: AuditEntry[]) => list.filter((e) =>
    e.service !== '' && !e.reason.endsWith('is not enabled on this agent') && Object.values(member).some((m) => m.id === e.memberId));
  const statusOf = (e: AuditEntry) => Object.values(member).find((m) => m.id === e.memberId)!.status;
  /** Today's policies: `no-delete` forbids delete_repository for everyone; pending members are denied everything. */
  const before = (e: AuditEntry): Decision => (statusOf(e) !== 'approved' || e.tool === 'delete_repository' ? 'DENY' : 'ALLOW');
  function expected(list: AuditEntry[], after: (e: AuditEntry) => Decision) {
    const replayed = replayable(list);
    const changed = replayed.filter((e) => before(e) !== after(e));
    return {
      evaluated: replayed.length,
      unchanged: replayed.length - changed.length,
      allowToDeny: changed.filter((e) => after(e) === 'DENY').length,
      denyToAllow: changed.filter((e) => after(e) === 'ALLOW').length,
      skipped: list.length - replayed.length,
    };
  }
  const newestFirst = (list: AuditEntry[]) => [...list].sort((a, b) => b.timestamp.localeCompare(a.timestamp) || b.id.localeCompare(a.id));
  const counts = (r: SimulateResponse) => ({ evaluated: r.evaluated, unchanged: r.unchanged, allowToDeny: r.allowToDeny, denyToAllow: r.denyToAllow, skipped: r.skipped });

  beforeAll(async () => {
    testDb = await createTestDatabase('simulate');
    database = await openDatabase({ DATABASE_URL: testDb.url, DATA_DIR: join(dataDir, 'db') });
    const db = database.db;
    const [agent] = await db.insert(schema.agents).values({ name: 'Support', policyVersion: 1, allowedServices: ['github'] }).returning();
    const [other] = await db.insert(schema.agents).values({ name: 'Other', policyVersion: 1 }).returning();
    agentId = agent!.id;
    for (const [name, status] of [['alice', 'approved'], ['bob', 'approved'], ['carol', 'pending']] as const) {
      const [user] = await db.insert(schema.users).values({ email: `${name}@example.com` }).returning();
      const [row] = await db.insert(schema.members).values({ agentId, userId: user!.id, email: `${name}@example.com`, role: 'member', status }).returning();
      member[name] = { id: row!.id, status };
    }
    const base = { service: 'github', effect: 'forbid' as const, tiers: [], principal: { type: 'all_members' as const }, conditions: {} };
    const rows = await db.insert(schema.policies).values([
      { ...base, agentId, policyKey: 'no-delete', name: 'No delete', tools: ['delete_repository'], denyMessage: 'Deleting repositories is off', enabled: true },
      { ...base, agentId, policyKey: 'no-comments', name: 'No comments', tools: ['add_issue_comment'], enabled: false },
      { ...base, agentId: other!.id, policyKey: 'elsewhere', name: 'Elsewhere', tools: ['get_me'], enabled: true },
    ]).returning();
    [noDeleteId, disabledId, otherAgentPolicyId] = rows.map((r) => r.id) as [string, string, string];

    // 650 calls over the last 6 days (more than one 500-entry audit page), 6 older ones, refused
    // requests the gateway audits without asking the decision point, and a member since removed.
    const who = [member.alice.id, member.bob.id, member.carol.id, member.alice.id, member.bob.id, ghost];
    entries = Array.from({ length: 650 }, (_, i) => makeEntry({
      agentId, agentName: 'Support', timestamp: new Date(NOW - MINUTE - i * 13 * MINUTE).toISOString(), memberId: who[i % who.length]!,
      service: 'github', tool: TOOLS[i % TOOLS.length]!, sessionId: `s-${i % 7}`, toolArgs: { owner: 'acme', repo: 'api' },
      ...(i % 37 === 0 ? { decision: 'DENY', reason: 'GitHub is not enabled on this agent' } : {}),
      ...(i % 41 === 0 ? { service: '', tool: 'tools/call', decision: 'DENY', reason: 'Agent is disabled' } : {}),
    }));
    entries.push(...Array.from({ length: 6 }, (_, i) => makeEntry({
      agentId, timestamp: new Date(NOW - 9 * DAY - i * MINUTE).toISOString(), memberId: member.alice.id, service: 'github', tool: 'issue_write',
    })));
    entries.push(makeEntry({ agentId: other!.id, timestamp: new Date(NOW - DAY).toISOString(), memberId: member.alice.id, tool: 'issue_write' }));

    bus = createMemoryBus();
    audit = await startAuditService(loadAuditConfig({ NODE_ENV: 'test', DATA_DIR: join(dataDir, 'audit'), GRPC_ADDRESS: '127.0.0.1:0' }), { bus });
    await audit.store.insert(entries);
    policy = await startPolicyService({ GRPC_ADDRESS: '127.0.0.1:0', AUDIT_URL: audit.address }, { db, bus });
    client = new PolicyDecisionService(policy.address, grpc.credentials.createInsecure());
  });

  afterAll(async () => {
    client?.close();
    await policy?.close();
    await audit?.close();
    await bus?.close();
    await database?.close();
    await testDb?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const recent = () => entries.filter((e) => e.agentId === agentId && Date.parse(e.timestamp) >= NOW - 7 * DAY);

  it('counts what a forbid added to the current policies would change over the last 7 days', async () => {
    const result = await call({ draftJson: draft() });
    const want = expected(recent(), (e) => (before(e) === 'ALLOW' && e.tool === 'issue_write' ? 'DENY' : before(e)));
    expect(want.allowToDeny).toBeGreaterThan(50);
    expect(counts(result)).toEqual({ ...want, denyToAllow: 0 });
    expect(result.evaluated + result.skipped).toBe(650);
    expect(Date.parse(result.to) - Date.parse(result.from)).toBe(7 * DAY);

    expect(result.samples).toHaveLength(20);
    const changedNewestFirst = newestFirst(replayable(recent())).filter((e) => before(e) === 'ALLOW' && e.tool === 'issue_write');
    expect(result.samples.map((s) => s.entryId)).toEqual(changedNewestFirst.slice(0, 20).map((e) => e.id));
    expect(result.samples[0]).toMatchObject({ before: 'ALLOW', after: 'DENY', reason: 'Issue writes are off' });
    // Each sample carries its entry's time, member and tool (issue 18, item 8).
    for (const [i, sample] of result.samples.entries()) {
      const e = changedNewestFirst[i]!;
      expect(sample).toMatchObject({ timestamp: e.timestamp, memberId: e.memberId, memberName: e.memberName, service: e.service, tool: e.tool });
    }
  });

  it('simulates a draft saved disabled as if it were on (a disabled draft would change nothing)', async () => {
    const on = await call({ draftJson: draft() });
    const off = await call({ draftJson: draft({ enabled: false }) });
    expect(counts(off)).toEqual(counts(on));
    expect(off.allowToDeny).toBeGreaterThan(50);
  });

  it('replays with the listed members only when the draft names them', async () => {
    const result = await call({ draftJson: draft({ principal: { type: 'members', ids: [member.bob.id] } }) });
    expect(counts(result)).toEqual(expected(recent(), (e) => (before(e) === 'ALLOW' && e.tool === 'issue_write' && e.memberId === member.bob.id ? 'DENY' : before(e))));
  });

  it('replaces a policy: what it forbade is allowed again, what the draft forbids is denied', async () => {
    const result = await call({ draftJson: draft(), replacePolicyId: noDeleteId });
    const after = (e: AuditEntry): Decision => (statusOf(e) !== 'approved' || e.tool === 'issue_write' ? 'DENY' : 'ALLOW');
    const want = expected(recent(), after);
    expect(want.denyToAllow).toBeGreaterThan(0);
    expect(counts(result)).toEqual(want);
    expect(result.samples.some((s) => s.before === 'DENY' && s.after === 'ALLOW' && s.reason === 'No forbid policy matched')).toBe(true);
  });

  it('replaces a disabled policy: the draft is what it would be once enabled', async () => {
    const result = await call({ draftJson: draft({ tools: ['add_issue_comment'] }), replacePolicyId: disabledId });
    expect(counts(result)).toEqual(expected(recent(), (e) => (before(e) === 'ALLOW' && e.tool === 'add_issue_comment' ? 'DENY' : before(e))));
  });

  it('reads only the newest `limit` entries', async () => {
    const result = await call({ draftJson: draft(), limit: 100 });
    const newest = newestFirst(recent()).slice(0, 100);
    expect(counts(result)).toEqual(expected(newest, (e) => (before(e) === 'ALLOW' && e.tool === 'issue_write' ? 'DENY' : before(e))));
    expect(result.evaluated + result.skipped).toBe(100);
  });

  it('reads only the window asked for, older entries included', async () => {
    const from = new Date(NOW - 10 * DAY).toISOString(), to = new Date(NOW - 5 * DAY).toISOString();
    const result = await call({ draftJson: draft(), from, to });
    const inWindow = entries.filter((e) => e.agentId === agentId && e.timestamp >= from && e.timestamp <= to);
    expect(inWindow.length).toBeGreaterThan(6);
    expect(counts(result)).toEqual(expected(inWindow, (e) => (before(e) === 'ALLOW' && e.tool === 'issue_write' ? 'DENY' : before(e))));
    expect(result).toMatchObject({ from, to });
  });

  it('refuses a draft with errors, naming them', async () => {
    await expect(call({ draftJson: draft({ tools: ['no_such_tool'] }) })).rejects.toMatchObject({
      code: grpc.status.INVALID_ARGUMENT, details: expect.stringContaining('unknown tool "no_such_tool"'),
    });
    await expect(call({ draftJson: '{nope' })).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT, details: 'draft_json is not valid JSON' });
  });

  it('refuses a replace_policy_id of another agent, a limit over 10,000 and a key already taken', async () => {
    await expect(call({ draftJson: draft(), replacePolicyId: otherAgentPolicyId })).rejects.toMatchObject({
      code: grpc.status.INVALID_ARGUMENT, details: expect.stringContaining('is not a policy of this agent'),
    });
    await expect(call({ draftJson: draft(), limit: 10_001 })).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
    await expect(call({ draftJson: draft({ policyKey: 'no-delete' }) })).rejects.toMatchObject({
      code: grpc.status.INVALID_ARGUMENT, details: expect.stringContaining('already used'),
    });
  });

  it('answers UNAVAILABLE when the audit service cannot be reached or is not configured', async () => {
    const port = await freePort();
    for (const config of [{ AUDIT_URL: `127.0.0.1:${port}` }, {}]) {
      const lonely = await startPolicyService({ GRPC_ADDRESS: '127.0.0.1:0', ...config }, { db: database.db, bus });
      const lonelyClient = new PolicyDecisionService(lonely.address, grpc.credentials.createInsecure());
      try {
        await expect(call({ draftJson: draft() }, lonelyClient)).rejects.toMatchObject({
          code: grpc.status.UNAVAILABLE, details: expect.stringMatching(/audit service/),
        });
      } finally {
        lonelyClient.close();
        await lonely.close();
      }
    }
  });
});
