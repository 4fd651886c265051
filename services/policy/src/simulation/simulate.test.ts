import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, schema, type AuditEntryMsg, type DatabaseHandle } from '@portcullis/core';
import { createTestDatabase, type TestDatabase } from '@portcullis/core/testing';
import { createAuditEntrySource, type RecentEntriesQuery } from '../clients/audit-entries.ts';
import { PolicyServiceError } from '../errors.ts';
import { createPolicyRepo } from '../store/policy-repo.ts';
import { createSimulationRepo } from '../store/simulation-repo.ts';
import { compileDraft, prepareScenario, type StoredPolicyRecord } from './replay.ts';
import { DEFAULT_LIMIT, isPolicyDecision, readSimulateRequest, recordsWithDraft, replay, simulate, type SimulateInput } from './simulate.ts';

const NOW = Date.UTC(2026, 10, 20, 12);
const request = (over: Partial<SimulateInput> = {}): SimulateInput => ({
  agentId: 'a', draftJson: '{}', replacePolicyId: '', from: '', to: '', limit: 0, ...over,
});
const invalid = (message: string | RegExp) => expect.objectContaining({ code: 'invalid_request', message: typeof message === 'string' ? message : expect.stringMatching(message) });

describe('readSimulateRequest', () => {
  it('defaults to the newest 1,000 entries of the last 7 days', () => {
    expect(readSimulateRequest(request(), () => NOW)).toEqual({
      agentId: 'a', draft: {}, replacePolicyId: undefined, from: new Date(NOW - 7 * 86_400_000), to: new Date(NOW), limit: DEFAULT_LIMIT,
    });
  });

  it('reads a window: a bare date as `to` is the whole day', () => {
    const plan = readSimulateRequest(request({ from: '2026-11-01T08:30:00+02:00', to: '2026-11-02', limit: 10_000, replacePolicyId: 'p' }), () => NOW);
    expect(plan).toMatchObject({ from: new Date('2026-11-01T06:30:00Z'), to: new Date('2026-11-02T23:59:59.999Z'), limit: 10_000, replacePolicyId: 'p' });
  });

  it.each([
    [{ agentId: '' }, 'agent_id is required'],
    [{ draftJson: '' }, 'draft_json is required'],
    [{ draftJson: '{' }, 'draft_json is not valid JSON'],
    [{ limit: 10_001 }, /^limit must be between 1 and 10000/],
    [{ limit: -1 }, /^limit must be/],
    [{ from: 'yesterday' }, /^from must be an ISO 8601/],
    [{ to: '2026-11-01T10:00' }, /^to must be an ISO 8601/],
    [{ from: '2026-11-03', to: '2026-11-02' }, /is after to/],
  ])('refuses %j', (over, message) => {
    expect(() => readSimulateRequest(request(over), () => NOW)).toThrow(PolicyServiceError);
    try {
      readSimulateRequest(request(over), () => NOW);
    } catch (err) {
      expect(err).toEqual(invalid(message));
    }
  });
});

describe('isPolicyDecision', () => {
  it.each([
    [{ service: 'github', tool: 'get_me', reason: 'No forbid policy matched' }, true],
    [{ service: 'github', tool: 'get_me', reason: 'Denied by policy "x"' }, true],
    [{ service: '', tool: 'tools/call', reason: 'Agent is disabled' }, false],
    [{ service: 'github', tool: 'get_me', reason: 'Agent is disabled' }, false],
    [{ service: 'github', tool: 'get_me', reason: 'GitHub is not enabled on this agent' }, false],
    [{ service: 'github', tool: 'get_me', reason: 'GitHub is not connected for this member; connect it in the dashboard first' }, false],
    [{ service: 'github', tool: 'get_me', reason: 'Policy service unavailable: the call was denied because no verdict could be obtained' }, false],
  ])('%j → %s', (entry, replayed) => expect(isPolicyDecision(entry)).toBe(replayed));
});

const stored = (over: Partial<StoredPolicyRecord>): StoredPolicyRecord => ({
  id: 'p-1', policyKey: 'k', name: 'K', service: 'github', effect: 'forbid', tools: ['delete_repository'], tiers: [],
  principal: { type: 'all_members' }, denyMessage: null, enabled: true, currentVersionId: 'v-1', ...over,
});

describe('recordsWithDraft', () => {
  const draftRecord = (policyKey?: string) => {
    const compiled = compileDraft({ name: 'D', service: 'github', effect: 'forbid', tools: ['get_me'], principal: { type: 'all_members' }, ...(policyKey ? { policyKey } : {}) });
    if (!compiled.ok) throw new Error(compiled.errors.join('; '));
    return compiled.record;
  };

  it('adds the draft under a key of its own', () => {
    const current = [stored({ policyKey: 'draft' }), stored({ id: 'p-2', policyKey: 'draft-2' })];
    expect(recordsWithDraft(current, draftRecord(), undefined).map((r) => [r.id, r.policyKey])).toEqual([['p-1', 'draft'], ['p-2', 'draft-2'], ['', 'draft-3']]);
  });

  it('replaces a policy, keeping its key when the draft has none', () => {
    const current = [stored({}), stored({ id: 'p-2', policyKey: 'other' })];
    expect(recordsWithDraft(current, draftRecord(), { id: 'p-1', policyKey: 'k' }).map((r) => [r.id, r.policyKey, r.tools])).toEqual([
      ['p-2', 'other', ['delete_repository']], ['p-1', 'k', ['get_me']],
    ]);
  });

  it('refuses a key another enabled policy has', () => {
    expect(() => recordsWithDraft([stored({})], draftRecord('k'), undefined)).toThrow(/already used by another policy of this agent; pass replace_policy_id/);
  });
});

describe('replay', () => {
  const member = { id: 'm-1', role: 'member', status: 'approved', email: 'm@example.com' };
  const snapshot = { agentId: 'agent-replay', agentStatus: 'active', policyVersion: 1, policies: [] };
  const call = (tool: string, minute: number) => ({
    entryId: `e-${String(minute).padStart(3, '0')}`, call: { member, service: 'github', tool, args: {}, nowMs: NOW + minute * 60_000, sessionId: 's' },
  });

  it('counts each change once and samples the newest 20 changes, newest first', async () => {
    const before = prepareScenario(snapshot, [stored({})], 'before');
    const after = prepareScenario(snapshot, [stored({ id: 'p-2', policyKey: 'g', tools: ['get_me'], denyMessage: 'No get_me' })], 'after');
    try {
      // 30 get_me (ALLOW → DENY), 5 delete_repository (DENY → ALLOW), 10 list_issues (unchanged), shuffled in time.
      const calls = [
        ...Array.from({ length: 30 }, (_, i) => call('get_me', i * 3)),
        ...Array.from({ length: 5 }, (_, i) => call('delete_repository', i * 3 + 1)),
        ...Array.from({ length: 10 }, (_, i) => call('list_issues', i * 3 + 2)),
      ].reverse();
      const result = await replay(calls, before, after);
      expect(result).toMatchObject({ evaluated: 45, unchanged: 10, allowToDeny: 30, denyToAllow: 5 });
      expect(result.samples).toHaveLength(20);
      expect(result.samples[0]).toEqual({ entryId: 'e-087', before: 'ALLOW', after: 'DENY', reason: 'No get_me' });
      expect(result.samples.map((s) => s.entryId)).toEqual([...result.samples.map((s) => s.entryId)].sort().reverse());
    } finally {
      before.release();
      after.release();
    }
  });
});

describe('simulate against Postgres', () => {
  let testDb: TestDatabase;
  let database: DatabaseHandle;
  const dataDir = mkdtempSync(join(tmpdir(), 'pc-simulate-unit-'));
  let agentId: string;
  let memberId: string;
  let asked: RecentEntriesQuery | undefined;
  let past: AuditEntryMsg[] = [];

  const entry = (over: Partial<AuditEntryMsg>): AuditEntryMsg => ({
    id: `e-${past.length}`, timestamp: new Date(NOW - 60_000).toISOString(), agentId, agentName: 'A', memberId, memberName: 'm', memberKeyId: 'k',
    sessionId: '', service: 'github', tool: 'get_me', action: '', resource: '', callerIp: '', toolArgsJson: '{}', decision: 'ALLOW',
    reason: 'No forbid policy matched', matchedPolicyIds: [], matchedPolicyNames: [], matchedPolicyDbIds: [], policyVersionIds: [], durationMs: 1, principal: '', ...over,
  });
  const run = (over: Partial<SimulateInput>) => {
    const deps = {
      policies: createPolicyRepo(database.db), store: createSimulationRepo(database.db), now: () => NOW,
      audit: { recentEntries: async (q: RecentEntriesQuery) => { asked = q; return past.slice(0, q.limit); } },
    };
    return simulate(deps, request({ agentId, draftJson: JSON.stringify({ name: 'D', service: 'github', effect: 'forbid', tools: ['get_me'], principal: { type: 'all_members' } }), ...over }));
  };

  beforeAll(async () => {
    testDb = await createTestDatabase('simulate_unit');
    database = await openDatabase({ DATABASE_URL: testDb.url, DATA_DIR: dataDir });
    const [agent] = await database.db.insert(schema.agents).values({ name: 'A', policyVersion: 1 }).returning();
    agentId = agent!.id;
    const [user] = await database.db.insert(schema.users).values({ email: 'm@example.com' }).returning();
    const [member] = await database.db.insert(schema.members).values({ agentId, userId: user!.id, email: 'm@example.com', status: 'approved' }).returning();
    memberId = member!.id;
  });

  afterAll(async () => {
    await database?.close();
    await testDb?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('replays entries with the member as stored now, skipping what it cannot replay', async () => {
    past = [];
    past.push(entry({}), entry({ tool: 'list_issues' }), entry({ memberId: '0195f0a0-0000-7000-8000-0000000dead0' }), entry({ service: '', reason: 'Agent is disabled' }));
    const result = await run({ limit: 3 });
    expect(asked).toEqual({ agentId, from: new Date(NOW - 7 * 86_400_000), to: new Date(NOW), limit: 3 });
    expect(result).toEqual({
      evaluated: 2, unchanged: 1, allowToDeny: 1, denyToAllow: 0, skipped: 1,
      samples: [{ entryId: 'e-0', before: 'ALLOW', after: 'DENY', reason: 'Denied by policy "D"' }],
      from: new Date(NOW - 7 * 86_400_000).toISOString(), to: new Date(NOW).toISOString(),
    });
  });

  it('refuses an unknown agent, an unknown replaced policy and a draft with errors', async () => {
    await expect(run({ agentId: '0195f0a0-0000-7000-8000-00000000ffff' })).rejects.toEqual(invalid(/is not an agent/));
    await expect(run({ replacePolicyId: '0195f0a0-0000-7000-8000-00000000ffff' })).rejects.toEqual(invalid(/is not a policy of this agent/));
    await expect(run({ draftJson: JSON.stringify({ name: 'D', service: 'nope', effect: 'forbid', principal: { type: 'all_members' } }) })).rejects.toEqual(invalid(/^the draft has errors: .*unknown service "nope"/));
  });

  it('answers unavailable without an audit service, and when it cannot be reached', async () => {
    await expect(simulate({ policies: createPolicyRepo(database.db), store: createSimulationRepo(database.db), audit: undefined }, request({ agentId, draftJson: JSON.stringify({ name: 'D', service: 'github', effect: 'forbid', principal: { type: 'all_members' } }) })))
      .rejects.toMatchObject({ code: 'unavailable', message: expect.stringContaining('no AUDIT_URL') });
    const source = createAuditEntrySource('127.0.0.1:1', { timeoutMs: 2_000 });
    try {
      await expect(source.recentEntries({ agentId, from: new Date(0), to: new Date(NOW), limit: 10 }))
        .rejects.toMatchObject({ code: 'unavailable', message: expect.stringMatching(/^The audit service at 127\.0\.0\.1:1 cannot be read \((UNAVAILABLE|DEADLINE_EXCEEDED)/) });
    } finally {
      source.close();
    }
  });
});
