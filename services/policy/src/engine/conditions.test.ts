import type * as grpc from '@grpc/grpc-js';
import { createMemoryBus, createNatsBus, type AuthorizeRequest, type AuthorizeResponse, type Bus } from '@portcullis/core';
import { deleteTestStreams, TEST_NATS_URL, uniqueSubjectPrefix } from '@portcullis/core/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { loadPolicyConfig } from '../config.ts';
import { createAuthorizeHandler } from '../handlers/authorize.ts';
import { validatePolicyStrict } from './cedar-schema.ts';
import { compileAgentPolicySet, compilePolicy, type StoredPolicyRecord } from './compile.ts';
import { DEFAULT_DENY_REASON, evaluate, localClock, type AuthorizeInput } from './evaluate.ts';
import { createPolicyCache } from './policy-cache.ts';
import { preparePolicySet, type AgentPolicySnapshot } from './prepared-set.ts';
import { compilePreview } from './preview.ts';
import { createInMemorySessionCounters, localSessionJudge, sharedSessionJudge, type SessionJudge } from './session-counters.ts';
import { catalogAction } from './action-index.ts';
import { PATTERN_TEXT_MAX } from '@portcullis/core';

const natsBuses: Array<{ bus: Bus; prefix: string }> = [];
afterAll(async () => {
  for (const { bus, prefix } of natsBuses) {
    await bus.close();
    await deleteTestStreams(TEST_NATS_URL, prefix);
  }
});

const AGENT_ID = '00000000-0000-4000-8000-0000000000d1';
const MONDAY_1030_UTC = Date.UTC(2026, 0, 5, 10, 30);
const member = { id: 'alice', role: 'member', status: 'approved', email: 'alice@example.com' };

function stored(overrides: Partial<StoredPolicyRecord> & { policyKey: string }): StoredPolicyRecord {
  return {
    id: `id-${overrides.policyKey}`, currentVersionId: `v-${overrides.policyKey}`, enabled: true, name: overrides.policyKey, service: 'github',
    effect: 'forbid', tools: ['issue_write'], tiers: [], principal: { type: 'all_members' }, denyMessage: null, ...overrides,
  };
}

function snapshot(policies: StoredPolicyRecord[], extra: Partial<AgentPolicySnapshot> = {}): AgentPolicySnapshot {
  return { agentId: AGENT_ID, agentStatus: 'active', policyVersion: 1, policies, ...extra };
}

function call(overrides: Partial<AuthorizeInput> = {}): AuthorizeInput {
  return { agentId: AGENT_ID, member, service: 'github', tool: 'issue_write', args: {}, nowMs: MONDAY_1030_UTC, sessionId: 's-1', ...overrides };
}

const draft = { name: 'Draft', service: 'github', effect: 'forbid', tools: ['delete_file'], principal: { type: 'all_members' } };

describe('preview of invalid drafts', () => {
  it.each([
    ['an unknown tool', { ...draft, tools: ['delete_everything'] }, ['unknown tool "delete_everything" for service "github"']],
    ['an unknown tier', { ...draft, tools: [], tiers: ['dangerous'] }, ['unknown tier "dangerous" (tiers are read, write, destructive)']],
    ['an unknown service', { ...draft, service: 'myspace', tools: [] }, ['unknown service "myspace"']],
    ['a bad regex', { ...draft, conditions: { args: [{ path: 'path', op: 'regex', pattern: '([a-z' }] } },
      ['conditions.args.0.pattern: must be a valid regular expression in RE2 syntax (no backreferences or lookaround): missing closing ]: `[a-z`']],
    ['a lookahead RE2 cannot run', { ...draft, conditions: { args: [{ path: 'path', op: 'regex', pattern: '^(?!docs/)' }] } },
      ['conditions.args.0.pattern: must be a valid regular expression in RE2 syntax (no backreferences or lookaround): invalid or unsupported Perl syntax: `(?!`']],
    ['a bad time zone', { ...draft, conditions: { timeWindow: { days: ['mon'], start: '09:00', end: '17:00', timeZone: 'Europe/Atlantis' } } },
      ['conditions.timeWindow.timeZone: must be an IANA time zone, e.g. Europe/Paris']],
    ['malformed conditions', { ...draft, conditions: { timeWindow: { days: ['someday'], start: '9am', end: '17:00', timeZone: 'UTC' }, sessionLimit: { maxCalls: -1 }, resources: { match: 'near', ids: [] }, colour: 'red' } },
      [
        'conditions.timeWindow.days.0: Invalid option: expected one of "mon"|"tue"|"wed"|"thu"|"fri"|"sat"|"sun"',
        'conditions.timeWindow.start: must be HH:MM (24-hour)',
        'conditions.sessionLimit.maxCalls: Too small: expected number to be >=0',
        'conditions.resources.match: Invalid option: expected one of "in"|"not_in"',
        'conditions.resources.ids: Too small: expected array to have >=1 items',
        'conditions: Unrecognized key: "colour"',
      ]],
    ['an equal start and end', { ...draft, conditions: { timeWindow: { days: ['mon'], start: '09:00', end: '09:00', timeZone: 'UTC' } } }, ['conditions.timeWindow.end: start and end must differ']],
    ['an unknown argument path', { ...draft, tools: ['delete_file', 'get_me'], conditions: { args: [{ path: 'path', op: 'prefix', value: 'infra/' }] } },
      ['conditions.args.0.path: argument "path" is not a parameter of tool "get_me" of "github"']],
    ['a dotted path into a string argument', { ...draft, conditions: { args: [{ path: 'path.inner', op: 'equals', value: 'x' }] } },
      ['conditions.args.0.path: argument "path.inner" is not a parameter of tool "delete_file" of "github"']],
    ['conditions that are not an object', { ...draft, conditions: 'always' }, ['conditions: Invalid input: expected record, received string']],
  ])('%s', (_label, body, errors) => {
    const preview = compilePreview(body);
    expect(preview.cedar).toBe('');
    expect(preview.errors).toEqual(errors);
  });

  it('compiles a valid draft with every condition, validated in strict mode', () => {
    const preview = compilePreview({
      ...draft, conditions: {
        timeWindow: { days: ['fri'], start: '22:00', end: '06:00', timeZone: 'Europe/Paris' },
        sessionLimit: { maxCalls: 5 }, resources: { match: 'in', ids: ['acme/api'] },
        args: [{ path: 'path', op: 'prefix', value: 'infra/' }, { path: 'branch', op: 'regex', pattern: '^release/' }],
      },
    });
    expect(preview.errors).toEqual([]);
    expect(preview.cedar).toContain('context.clock.hasTag("Europe/Paris")');
    expect(preview.cedar).toContain('context.session.getTag("draft") >= 5');
    expect(preview.cedar).toContain('GithubMCP::Repository::"acme/api"');
    expect(preview.cedar).toContain('like "infra/*"');
    expect(preview.cedar).toContain('context.matches.getTag("draft#args.1")');
  });
});

describe('strict validation', () => {
  it('reports what the schema does not know', () => {
    const result = validatePolicyStrict('github', 'p', 'forbid (principal, action == GithubMCP::Action::"get_me", resource) when { context.weather == "rain" && resource is GithubMCP::Repo };');
    expect(result.errors.length).toBeGreaterThanOrEqual(1);
    expect(result.errors.every((e) => e.startsWith('cedar: '))).toBe(true);
    expect(result.errors.join('\n')).toMatch(/weather|Repo/);
  });
});

describe('serving stored records', () => {
  it('keeps a record whose argument path the catalog no longer has, with a warning (a missing argument never matches)', () => {
    const source = compileAgentPolicySet([stored({ policyKey: 'old-path', conditions: { args: [{ path: 'retired', op: 'equals', value: 'x' }] } })]);
    expect(source.errors).toEqual([]);
    expect(source.warnings).toEqual(['Policy "old-path": conditions.args.0.path: argument "retired" is not a parameter of tool "issue_write" of "github"']);
    const set = preparePolicySet(snapshot([stored({ policyKey: 'old-path', conditions: { args: [{ path: 'retired', op: 'equals', value: 'x' }] } })]), 'serve:drift');
    expect(evaluate(set, call({ args: { retired: 'x' } })).decision).toBe('DENY');
    expect(evaluate(set, call({ args: {} })).decision).toBe('ALLOW');
  });

  it('fails closed on malformed conditions (a forbid must never silently loosen)', () => {
    const set = preparePolicySet(snapshot([stored({ policyKey: 'broken', conditions: { sessionLimit: { maxCalls: 'three' } } })]), 'serve:broken');
    const verdict = evaluate(set, call({ tool: 'get_me' }));
    expect(verdict.decision).toBe('DENY');
    expect(verdict.reason).toContain('conditions.sessionLimit.maxCalls');
  });
});

describe('regex rules (linear-time patterns, decision 020)', () => {
  const catastrophic = (effect: 'forbid' | 'permit', policyKey = `title-${effect}`) =>
    stored({ policyKey, effect, denyMessage: 'Titles of only a', conditions: { args: [{ path: 'title', op: 'regex', pattern: '^(a+)+$' }] } });

  it('decide a catastrophic pattern on a long argument, and correctly (a backtracking engine would not return)', () => {
    const set = preparePolicySet(snapshot([catastrophic('forbid')]), 'regex:catastrophic');
    expect(evaluate(set, call({ args: { title: `${'a'.repeat(4_000)}!` } }))).toMatchObject({ decision: 'ALLOW', matchedPolicyKeys: [] });
    expect(evaluate(set, call({ args: { title: 'a'.repeat(4_000) } }))).toMatchObject({ decision: 'DENY', reason: 'Titles of only a', matchedPolicyKeys: ['title-forbid'] });
  });

  it(`fail closed on a value longer than ${PATTERN_TEXT_MAX} characters: a forbid applies, a permit does not permit`, () => {
    const long = `${'b'.repeat(PATTERN_TEXT_MAX)}!`;
    const forbid = preparePolicySet(snapshot([catastrophic('forbid')]), 'regex:long-forbid');
    expect(evaluate(forbid, call({ args: { title: long } }))).toMatchObject({ decision: 'DENY', reason: 'Titles of only a' });
    const permit = preparePolicySet(snapshot([catastrophic('permit')], { defaultDecision: 'deny' }), 'regex:long-permit');
    expect(evaluate(permit, call({ args: { title: long } }))).toMatchObject({ decision: 'DENY', reason: DEFAULT_DENY_REASON });
    expect(evaluate(permit, call({ args: { title: 'aaa' } })).decision).toBe('ALLOW');
    // A missing argument still never matches.
    expect(evaluate(forbid, call({ args: {} })).decision).toBe('ALLOW');
  });

  it('fail closed once the patterns of one call have spent their budget', () => {
    // Two rules of about 500 instructions each; the second never matches letters alone. On a
    // 1,000-character value the budget runs only the first: the second counts as matching.
    const heavy = `(${'[a-z]{1,49}'.repeat(5)})`;
    const rules = [{ path: 'title', op: 'regex', pattern: heavy }, { path: 'title', op: 'regex', pattern: `${heavy}0` }];
    const set = preparePolicySet(snapshot([stored({ policyKey: 'heavy', denyMessage: 'Heavy', conditions: { args: rules } })]), 'regex:budget');
    expect(evaluate(set, call({ args: { title: 'a'.repeat(100) } })).decision).toBe('ALLOW');
    expect(evaluate(set, call({ args: { title: 'a'.repeat(1_000) } }))).toMatchObject({ decision: 'DENY', reason: 'Heavy' });
  });

  it('fail the agent closed on a stored pattern RE2 cannot run, naming it', () => {
    const set = preparePolicySet(snapshot([stored({ policyKey: 'lookahead', conditions: { args: [{ path: 'title', op: 'regex', pattern: '^(?!draft)' }] } })]), 'regex:legacy');
    const verdict = evaluate(set, call({ tool: 'get_me' }));
    expect(verdict.decision).toBe('DENY');
    expect(verdict.reason).toMatch(/conditions\.args\.0\.pattern: must be a valid regular expression in RE2 syntax/);
  });
});

describe('remembered outcomes', () => {
  it('are never kept for an action whose policies carry conditions', () => {
    const set = preparePolicySet(snapshot([
      stored({ policyKey: 'window', tools: ['issue_write'], conditions: { timeWindow: { days: ['mon'], start: '09:00', end: '12:00', timeZone: 'UTC' } } }),
      stored({ policyKey: 'plain', tools: ['delete_file'] }),
    ]), 'memo:conditions');
    const conditional = set.actionSetFor(catalogAction('github', 'issue_write')!);
    const plain = set.actionSetFor(catalogAction('github', 'delete_file')!);
    expect('memo' in conditional && conditional.memo).toBeUndefined();
    expect('memo' in plain && plain.memo).toBeInstanceOf(Map);
    // Same member, same action: the answer follows the clock, call after call.
    expect(evaluate(set, call({ nowMs: MONDAY_1030_UTC })).decision).toBe('DENY');
    expect(evaluate(set, call({ nowMs: MONDAY_1030_UTC + 2 * 3_600_000 })).decision).toBe('ALLOW');
    expect(evaluate(set, call({ nowMs: MONDAY_1030_UTC })).decision).toBe('DENY');
  });

  it('are still kept for a deny-by-default agent without conditions', () => {
    const set = preparePolicySet(snapshot([stored({ policyKey: 'reads', effect: 'permit', tools: ['get_me'] })], { defaultDecision: 'deny' }), 'memo:deny');
    expect(evaluate(set, call({ tool: 'get_me' })).decision).toBe('ALLOW');
    const other = evaluate(set, call({ tool: 'delete_file' }));
    expect(other).toMatchObject({ decision: 'DENY', reason: DEFAULT_DENY_REASON, matchedPolicyKeys: [] });
    const actionSet = set.actionSetFor(catalogAction('github', 'get_me')!);
    expect('memo' in actionSet && actionSet.memo?.size).toBe(1);
  });
});

describe('session limits', () => {
  const limited = (maxCalls: number, extra: Partial<StoredPolicyRecord> = {}) => stored({ policyKey: 'three-writes', conditions: { sessionLimit: { maxCalls } }, ...extra });

  it('counters survive an edit of the policy: they are keyed by policy key, not version', () => {
    const sessions = createInMemorySessionCounters();
    const before = preparePolicySet(snapshot([limited(3)]), 'limit:before');
    for (let i = 0; i < 2; i++) expect(evaluate(before, call(), { sessions }).decision).toBe('ALLOW');
    // The owner edits it: new version, new name, limit raised to 4, another tool added.
    const after = preparePolicySet(snapshot([limited(4, { currentVersionId: 'v-2', name: 'Four writes', tools: ['issue_write', 'add_issue_comment'] })], { policyVersion: 2 }), 'limit:after');
    expect(evaluate(after, call(), { sessions }).decision).toBe('ALLOW');
    expect(evaluate(after, call({ tool: 'add_issue_comment' }), { sessions }).decision).toBe('ALLOW');
    expect(evaluate(after, call(), { sessions })).toMatchObject({ decision: 'DENY', matchedPolicyKeys: ['three-writes'], policyVersionIds: ['v-2'] });
    expect(sessions.read('s-1', ['three-writes'])).toEqual([4]);
  });

  it('without counters a session-limited policy does not apply (as for a call without a session)', () => {
    const set = preparePolicySet(snapshot([limited(0)]), 'limit:no-counters');
    expect(evaluate(set, call()).decision).toBe('ALLOW');
    expect(evaluate(set, call({ sessionId: '' }), { sessions: createInMemorySessionCounters() }).decision).toBe('ALLOW');
    expect(evaluate(set, call(), { sessions: createInMemorySessionCounters() }).decision).toBe('DENY');
  });

  it.each<[string, () => Promise<SessionJudge>]>([
    ['this process\'s counters', async () => localSessionJudge(createInMemorySessionCounters())],
    ['shared counters (compare-and-set, in-process bucket)', async () => sharedSessionJudge(await createMemoryBus().keyValue('C', { ttlMs: 60_000 }))],
    ['shared counters (compare-and-set, JetStream KV)', async () => {
      const prefix = uniqueSubjectPrefix('counters');
      const bus = await createNatsBus({ url: TEST_NATS_URL, subjectPrefix: prefix });
      natsBuses.push({ bus, prefix });
      return sharedSessionJudge(await bus.keyValue('SESSION_COUNTERS', { ttlMs: 60_000 }));
    }],
  ])('lets exactly N of N+k concurrent authorizations of one session through: %s', async (_label, makeJudge) => {
    const maxCalls = 5;
    const extra = 7;
    const repo = {
      loadAgentPolicies: async () => {
        await new Promise((resolve) => setTimeout(resolve, 20)); // every call arrives before the set is loaded
        return snapshot([limited(maxCalls)]);
      },
    };
    const cache = createPolicyCache({ repo, retireDelayMs: 0 });
    const handler = createAuthorizeHandler({ cache, counters: await makeJudge() });
    const request = (sessionId: string): AuthorizeRequest => ({
      agentId: AGENT_ID, member, service: 'github', tool: 'issue_write', toolArgsJson: '{}', sessionId, policyVersion: 1, nowMs: MONDAY_1030_UTC,
    });
    const authorize = (sessionId: string) => new Promise<AuthorizeResponse>((resolve, reject) => {
      const callback = ((err: grpc.ServiceError | null, value?: AuthorizeResponse) => (err ? reject(err) : resolve(value!))) as grpc.sendUnaryData<AuthorizeResponse>;
      handler({ request: request(sessionId) } as grpc.ServerUnaryCall<AuthorizeRequest, AuthorizeResponse>, callback);
    });
    try {
      const verdicts = await Promise.all([
        ...Array.from({ length: maxCalls + extra }, () => authorize('busy')),
        authorize('quiet'),
      ]);
      const busy = verdicts.slice(0, maxCalls + extra);
      expect(busy.filter((v) => v.decision === 'ALLOW')).toHaveLength(maxCalls);
      expect(busy.filter((v) => v.decision === 'DENY')).toHaveLength(extra);
      expect(verdicts.at(-1)!.decision).toBe('ALLOW');
      // And once the set is cached (synchronous path), the session stays at its limit.
      expect((await authorize('busy')).decision).toBe('DENY');
    } finally {
      cache.close();
    }
  });

  it('in memory, forgets the least recently used session past its size', () => {
    const sessions = createInMemorySessionCounters({ maxSessions: 2 });
    sessions.recordAllowed('a', ['k']);
    sessions.recordAllowed('b', ['k']);
    sessions.read('a', ['k']); // a is now the most recently used
    sessions.recordAllowed('c', ['k', 'k2']);
    expect(sessions.size).toBe(2);
    expect(sessions.read('b', ['k'])).toEqual([0]);
    expect(sessions.read('a', ['k'])).toEqual([1]);
    expect(sessions.read('c', ['k', 'k2', 'k3'])).toEqual([1, 1, 0]);
  });
});

describe('localClock', () => {
  it('gives the local weekday (0 = Sunday) and minute, daylight saving time included', () => {
    expect(localClock('Europe/Paris', MONDAY_1030_UTC)).toEqual({ day: 1, minute: 11 * 60 + 30 });
    expect(localClock('Europe/Paris', Date.UTC(2026, 6, 6, 10, 30))).toEqual({ day: 1, minute: 12 * 60 + 30 });
    expect(localClock('Pacific/Auckland', Date.UTC(2026, 0, 4, 12, 0))).toEqual({ day: 1, minute: 1 * 60 });
    expect(localClock('UTC', Date.UTC(2026, 0, 4, 0, 0, 59))).toEqual({ day: 0, minute: 0 });
    expect(localClock('Not/AZone', MONDAY_1030_UTC)).toBeUndefined();
  });
});

describe('POLICY_CLOCK_OFFSET_MS', () => {
  it('defaults to 0, reads an integer, and is refused in production', () => {
    expect(loadPolicyConfig({}).POLICY_CLOCK_OFFSET_MS).toBe(0);
    expect(loadPolicyConfig({ POLICY_CLOCK_OFFSET_MS: '-3600000' }).POLICY_CLOCK_OFFSET_MS).toBe(-3_600_000);
    expect(() => loadPolicyConfig({ POLICY_CLOCK_OFFSET_MS: '1.5' })).toThrow(/POLICY_CLOCK_OFFSET_MS/);
    expect(() => loadPolicyConfig({ NODE_ENV: 'production', POLICY_CLOCK_OFFSET_MS: '60000', PORTCULLIS_SECRET: 'x'.repeat(64) })).toThrow(/POLICY_CLOCK_OFFSET_MS/);
  });
});

describe('compilePolicy', () => {
  it('turns an empty conditions object into no clause at all', () => {
    const plain = compilePolicy(stored({ policyKey: 'p' }));
    expect(compilePolicy(stored({ policyKey: 'p', conditions: {} }))).toEqual(plain);
    expect(compilePolicy(stored({ policyKey: 'p', conditions: null }))).toEqual(plain);
  });
});
