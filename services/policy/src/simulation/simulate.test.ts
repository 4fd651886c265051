import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eq } from 'drizzle-orm';
import { openDatabase, PATTERN_TEXT_MAX, schema, type AuditEntryMsg, type DatabaseHandle } from '@portcullis/core';
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
    // An unknown tool under a connector's prefix names the connector (decision 071); no decision point judged it.
    [{ service: 'slack', tool: 'list_channels_typo', reason: 'Unknown tool "slack__list_channels_typo". Tool names are <service>__<tool>, exactly as tools/list shows them.' }, false],
    // Call approvals (decision 063): the held call and the approved call are calls; an owner's decision and a return are not.
    [{ service: 'github', tool: 'issue_write', reason: 'Awaiting an owner\'s approval', approvalEvent: 'proposed' }, true],
    [{ service: 'github', tool: 'issue_write', reason: 'Approved by o@example.com', approvalEvent: 'executed' }, true],
    [{ service: 'github', tool: 'issue_write', reason: 'Approved by o@example.com', approvalEvent: 'approved' }, false],
    [{ service: 'github', tool: 'issue_write', reason: 'No forbid policy matched', approvalEvent: 'returned' }, false],
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
      expect(result.samples[0]).toEqual({
        entryId: 'e-087', before: 'ALLOW', after: 'DENY', reason: 'No get_me',
        timestamp: new Date(NOW + 87 * 60_000).toISOString(), memberId: member.id, memberName: member.email, service: 'github', tool: 'get_me',
      });
      expect(result.samples.map((s) => s.entryId)).toEqual([...result.samples.map((s) => s.entryId)].sort().reverse());
    } finally {
      before.release();
      after.release();
    }
  });

  it('counts a call that becomes approval-required as a change, and one that stops being so (decision 063)', async () => {
    const approval = stored({ id: 'p-3', policyKey: 'ask', name: 'Ask', effect: 'require_approval', tools: ['get_me'] });
    const without = prepareScenario(snapshot, [], 'without');
    const withApproval = prepareScenario(snapshot, [approval], 'with');
    try {
      const calls = [call('get_me', 1), call('get_me', 2), call('list_issues', 3)];
      const held = await replay(calls, without, withApproval);
      expect(held).toMatchObject({ evaluated: 3, unchanged: 1, allowToDeny: 0, denyToAllow: 0, toApproval: 2, fromApproval: 0 });
      expect(held.samples[0]).toMatchObject({ before: 'ALLOW', after: 'APPROVAL_REQUIRED', reason: 'Approval required by policy "Ask"' });
      expect(await replay(calls, withApproval, without)).toMatchObject({ unchanged: 1, toApproval: 0, fromApproval: 2 });
    } finally {
      without.release();
      withApproval.release();
    }
  });
});

describe('replay under heavy argument patterns (decision 020)', () => {
  it('yields to the event loop while judging, so Authorize calls are answered meanwhile; the counts stay right', async () => {
    const member = { id: 'm-1', role: 'member', status: 'approved', email: 'm@example.com' };
    const snapshot = { agentId: 'agent-heavy', agentStatus: 'active', policyVersion: 1, policies: [] };
    // A pattern RE2's DFA cannot cache (its states explode), over ~1,000 random characters:
    // milliseconds per call, within the per-call budget.
    const pattern = '(a|b)*a(a|b){80}c';
    const heavy = stored({ id: 'p-h', policyKey: 'heavy', tools: ['issue_write'], denyMessage: 'Heavy', conditions: { args: [{ path: 'title', op: 'regex', pattern }] } });
    const letters = (n: number, seed: number) => Array.from({ length: n }, (_, i) => ((i * 7 + seed) % 3 === 0 ? 'a' : 'b')).join('');
    const calls = Array.from({ length: 60 }, (_, i) => ({
      entryId: `e-${String(i).padStart(3, '0')}`,
      call: { member, service: 'github', tool: 'issue_write', args: { title: `${letters(1_000, i)}${i % 2 === 0 ? 'c' : ''}` }, nowMs: NOW + i, sessionId: '' },
    }));
    const before = prepareScenario(snapshot, [], 'before');
    const after = prepareScenario(snapshot, [heavy], 'after');
    try {
      let answeredMeanwhile = false;
      let replayDone = false;
      setImmediate(() => { answeredMeanwhile = !replayDone; });
      const result = await replay(calls, before, after);
      replayDone = true;
      expect(answeredMeanwhile).toBe(true);
      // A title matches when it ends in "c" with an "a" 81 characters before it.
      const matching = calls.filter(({ call }) => /a[ab]{80}c$/.test(String(call.args.title))).length;
      expect(matching).toBeGreaterThan(0);
      expect(result).toMatchObject({ evaluated: 60, unchanged: 60 - matching, allowToDeny: matching, denyToAllow: 0 });
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
      evaluated: 2, unchanged: 1, allowToDeny: 1, denyToAllow: 0, toApproval: 0, fromApproval: 0, skipped: 1, draftMode: 'enforce', enforcedChanges: 1,
      samples: [{
        entryId: 'e-0', before: 'ALLOW', after: 'DENY', reason: 'Denied by policy "D"',
        timestamp: new Date(NOW - 60_000).toISOString(), memberId, memberName: 'm', service: 'github', tool: 'get_me',
      }],
      from: new Date(NOW - 7 * 86_400_000).toISOString(), to: new Date(NOW).toISOString(),
    });
  });

  it('replays a shadow draft for what it would do once promoted; saved in shadow it changes nothing, unless it moves an enforced policy into shadow (decision 061)', async () => {
    past = [];
    past.push(entry({ tool: 'get_me' }), entry({ tool: 'get_me' }));
    const shadowDraft = JSON.stringify({ name: 'D', service: 'github', effect: 'forbid', tools: ['get_me'], principal: { type: 'all_members' }, mode: 'shadow' });
    expect(await run({ draftJson: shadowDraft })).toMatchObject({ evaluated: 2, allowToDeny: 2, draftMode: 'shadow', enforcedChanges: 0 });

    // An enforced forbid on get_me, then the same policy moved into shadow: saving frees both calls now.
    const [policy] = await database.db.insert(schema.policies).values({
      agentId, policyKey: 'enforced-get-me', name: 'E', service: 'github', effect: 'forbid', tools: ['get_me'], principal: { type: 'all_members' },
    }).returning();
    try {
      past = [];
      past.push(entry({ decision: 'DENY', reason: 'Denied by policy "E"' }), entry({ decision: 'DENY', reason: 'Denied by policy "E"' }));
      const moved = await run({ draftJson: shadowDraft, replacePolicyId: policy!.id });
      expect(moved).toMatchObject({ evaluated: 2, unchanged: 2, allowToDeny: 0, denyToAllow: 0, draftMode: 'shadow', enforcedChanges: 2 });
    } finally {
      await database.db.delete(schema.policies).where(eq(schema.policies.id, policy!.id));
    }
  });

  it('replays a draft with a catastrophic pattern over long arguments, deciding each as serving would (decision 020)', async () => {
    past = [];
    const title = (text: string) => entry({ tool: 'issue_write', toolArgsJson: JSON.stringify({ owner: 'acme', repo: 'api', title: text }) });
    for (const text of [`${'a'.repeat(4_000)}!`, 'a'.repeat(4_000), 'b'.repeat(PATTERN_TEXT_MAX + 1)]) past.push(title(text));
    const draftJson = JSON.stringify({
      name: 'Only-a titles', service: 'github', effect: 'forbid', tools: ['issue_write'], principal: { type: 'all_members' },
      conditions: { args: [{ path: 'title', op: 'regex', pattern: '^(a+)+$' }] },
    });
    const result = await run({ draftJson });
    expect(result).toMatchObject({ evaluated: 3, unchanged: 1, allowToDeny: 2, denyToAllow: 0 });
    // The over-long title (no "a" in it) is not run through the pattern: a forbid fails closed.
    expect(result.samples.map((s) => s.entryId).sort()).toEqual(['e-1', 'e-2']);
    await expect(run({ draftJson: JSON.stringify({ ...JSON.parse(draftJson), conditions: { args: [{ path: 'title', op: 'regex', pattern: '(a)\\1' }] } }) }))
      .rejects.toEqual(invalid(/^the draft has errors: conditions\.args\.0\.pattern: must be a valid regular expression in RE2 syntax/));
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
