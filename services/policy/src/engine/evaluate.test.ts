import { NO_FORBID_MATCHED } from '@portcullis/core';
import { describe, expect, it } from 'vitest';
import type { StoredPolicyRecord } from './compile.ts';
import { AGENT_DISABLED_REASON, clockContext, denyWithoutPolicySet, evaluate, outcomeOf, UNKNOWN_AGENT_REASON, type AuthorizeInput } from './evaluate.ts';
import { preparePolicySet, type AgentPolicySnapshot } from './prepared-set.ts';

const AGENT_ID = '00000000-0000-4000-8000-0000000000e0';
let builds = 0;

const forbidDeletes: StoredPolicyRecord = {
  id: 'db-1', currentVersionId: 'ver-1', enabled: true, policyKey: 'no-deletes', name: 'No deletes', service: 'github', effect: 'forbid',
  tools: ['delete_repository'], tiers: [], principal: { type: 'all_members' }, denyMessage: 'Deleting is blocked',
};

function prepare(overrides: Partial<AgentPolicySnapshot> = {}) {
  builds += 1;
  return preparePolicySet({ agentId: AGENT_ID, agentStatus: 'active', policyVersion: 7, policies: [forbidDeletes], ...overrides }, `evaluate-test:${builds}`);
}

function call(overrides: Partial<AuthorizeInput> = {}): AuthorizeInput {
  return {
    agentId: AGENT_ID,
    member: { id: 'm-1', role: 'member', status: 'approved', email: 'm1@example.com' },
    service: 'github',
    tool: 'delete_repository',
    args: { owner: 'acme', repo: 'api' },
    nowMs: Date.UTC(2026, 0, 5, 10, 30),
    ...overrides,
  };
}

describe('evaluate', () => {
  it('names the call the way audit entries do', () => {
    const verdict = evaluate(prepare(), call());
    expect(verdict).toMatchObject({
      decision: 'DENY',
      reason: 'Deleting is blocked',
      matchedPolicyKeys: ['no-deletes'],
      matchedPolicyNames: ['No deletes'],
      matchedPolicyIds: ['db-1'],
      policyVersionIds: ['ver-1'],
      principal: 'Portcullis::Member::"m-1"',
      action: 'GithubMCP::Action::"delete_repository"',
      resource: 'GithubMCP::Repository::"acme/api"',
      policyVersion: 7,
    });
  });

  it('denies every call of a disabled agent', () => {
    const verdict = evaluate(prepare({ agentStatus: 'disabled' }), call({ tool: 'get_me' }));
    expect(verdict).toMatchObject({ decision: 'DENY', reason: AGENT_DISABLED_REASON, matchedPolicyKeys: [] });
  });

  it('denies a tool the catalog does not have', () => {
    const verdict = evaluate(prepare(), call({ tool: 'format_disk' }));
    expect(verdict).toMatchObject({ decision: 'DENY', reason: 'Denied: unknown tool "github__format_disk"', action: 'GithubMCP::Action::"format_disk"' });
  });

  it('denies every call when a policy of the agent cannot be compiled, naming it', () => {
    const broken = prepare({ policies: [forbidDeletes, { ...forbidDeletes, id: 'db-2', policyKey: 'broken', name: 'Broken', service: 'gone' }] });
    const verdict = evaluate(broken, call({ tool: 'get_me' }));
    expect(verdict.decision).toBe('DENY');
    expect(verdict.reason).toBe('Denied: the agent\'s policies cannot be used: Policy "Broken" cannot be compiled: unknown service "gone"');
  });

  it('remembers an outcome per member but hands out copies', () => {
    const set = prepare();
    const first = evaluate(set, call());
    first.matchedPolicyKeys.push('tampered');
    const second = evaluate(set, call({ args: { owner: 'other', repo: 'x' } }));
    expect(second.matchedPolicyKeys).toEqual(['no-deletes']);
    expect(second.resource).toBe('GithubMCP::Repository::"other/x"');
  });

  it('evaluates again when the member\'s attributes change', () => {
    const set = prepare();
    const pending = { id: 'm-2', role: 'member', status: 'pending', email: 'm2@example.com' };
    expect(evaluate(set, call({ tool: 'get_me', member: pending })).reason).toBe('Member is pending approval');
    expect(evaluate(set, call({ tool: 'get_me', member: { ...pending, status: 'approved' } })).reason).toBe(NO_FORBID_MATCHED);
    expect(evaluate(set, call({ tool: 'get_me', member: { ...pending, status: 'rejected' } })).reason).toBe('Member was rejected by the agent owner');
  });

  it('refuses to evaluate a set after it was released', () => {
    const set = prepare();
    set.release();
    expect(evaluate(set, call()).reason).toBe('Denied: the policy set was replaced while the call was evaluated; retry');
  });
});

describe('outcomeOf', () => {
  it('turns a policy Cedar could not evaluate into a DENY naming it, even when Cedar allowed', () => {
    const outcome = outcomeOf(prepare(), {
      decision: 'allow',
      diagnostics: {
        reason: ['portcullis.base'],
        errors: [{ policyId: 'no-deletes', error: { message: 'record does not have the attribute `hour`', help: null, code: null, url: null, severity: null } }],
      },
    }, 'approved');
    expect(outcome).toEqual({
      decision: 'DENY',
      reason: 'Denied: policy "No deletes" could not be evaluated: record does not have the attribute `hour`',
      matchedPolicyKeys: ['no-deletes'],
      matchedPolicyNames: ['No deletes'],
      matchedPolicyIds: ['db-1'],
      policyVersionIds: ['ver-1'],
    });
  });

  it('sorts matched policies, whatever order Cedar gives', () => {
    const set = prepare({ policies: [forbidDeletes, { ...forbidDeletes, id: 'db-0', currentVersionId: 'ver-0', policyKey: 'a-first', name: 'First', denyMessage: null }] });
    const outcome = outcomeOf(set, { decision: 'deny', diagnostics: { reason: ['no-deletes', 'a-first'], errors: [] } }, 'approved');
    expect(outcome.matchedPolicyKeys).toEqual(['a-first', 'no-deletes']);
    expect(outcome.matchedPolicyIds).toEqual(['db-0', 'db-1']);
    expect(outcome.reason).toBe('Denied by policy "First"');
  });
});

describe('clockContext', () => {
  it('gives UTC hour and day of week (0 = Sunday) without Date', () => {
    expect(clockContext(Date.UTC(2026, 0, 5, 10, 30))).toEqual({ now: Date.UTC(2026, 0, 5, 10, 30), hour: 10, dayOfWeek: 1 });
    expect(clockContext(Date.UTC(2026, 0, 4, 23, 59, 59))).toMatchObject({ hour: 23, dayOfWeek: 0 });
    for (let day = 0; day < 14; day++) {
      const ms = Date.UTC(2025, 11, 20 + day, day);
      expect(clockContext(ms)).toMatchObject({ hour: new Date(ms).getUTCHours(), dayOfWeek: new Date(ms).getUTCDay() });
    }
  });
});

describe('denyWithoutPolicySet', () => {
  it('denies with the given reason and still names the call', () => {
    expect(denyWithoutPolicySet(call(), UNKNOWN_AGENT_REASON)).toMatchObject({
      decision: 'DENY', reason: 'Denied: unknown agent', principal: 'Portcullis::Member::"m-1"', resource: 'GithubMCP::Repository::"acme/api"', policyVersion: 0,
    });
  });
});
