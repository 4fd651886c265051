import { describe, expect, it } from 'vitest';
import type { StoredPolicyRecord } from './compile.ts';
import { evaluate, type AuthorizeInput } from './evaluate.ts';
import { preparePolicySet, type AgentPolicySnapshot } from './prepared-set.ts';
import { createInMemorySessionCounters } from './session-counters.ts';

/** Shadow policies (decision 061): evaluated beside the verdict, never changing it. */
const AGENT_ID = '00000000-0000-4000-8000-0000000000f1';
let builds = 0;

const record = (overrides: Partial<StoredPolicyRecord>): StoredPolicyRecord => ({
  id: 'db-x', currentVersionId: 'ver-x', enabled: true, policyKey: 'x', name: 'X', service: 'github', effect: 'forbid',
  tools: ['get_me'], tiers: [], principal: { type: 'all_members' }, denyMessage: null, ...overrides,
});
const shadowForbid = record({ id: 'db-shadow', policyKey: 'shadow-forbid', name: 'Shadow forbid', mode: 'shadow', denyMessage: 'Would be blocked' });
const shadowPermit = record({ id: 'db-permit', policyKey: 'shadow-permit', name: 'Shadow permit', effect: 'permit', mode: 'shadow' });
const enforcedForbid = record({ id: 'db-enforced', policyKey: 'enforced-forbid', name: 'Enforced forbid', tools: ['delete_repository'], denyMessage: 'No deletes' });

function prepare(policies: StoredPolicyRecord[], overrides: Partial<AgentPolicySnapshot> = {}) {
  builds += 1;
  return preparePolicySet({ agentId: AGENT_ID, agentStatus: 'active', policyVersion: 3, policies, ...overrides }, `shadow-test:${builds}`);
}

const call = (overrides: Partial<AuthorizeInput> = {}): AuthorizeInput => ({
  agentId: AGENT_ID, member: { id: 'm-1', role: 'member', status: 'approved', email: 'm1@example.com' },
  service: 'github', tool: 'get_me', args: {}, nowMs: Date.UTC(2026, 0, 5, 10, 30), ...overrides,
});

describe('shadow policies', () => {
  it('a shadow forbid leaves the call allowed and says it would have denied it', () => {
    const verdict = evaluate(prepare([shadowForbid]), call());
    expect(verdict).toMatchObject({
      decision: 'ALLOW', matchedPolicyKeys: [], matchedPolicyIds: [],
      shadowDecision: 'DENY', shadowPolicyKeys: ['shadow-forbid'], shadowPolicyIds: ['db-shadow'],
    });
    // A tool it does not cover: the shadow verdict is the enforced one, decided by no shadow policy.
    expect(evaluate(prepare([shadowForbid]), call({ tool: 'list_issues', args: { owner: 'a', repo: 'b' } })))
      .toMatchObject({ decision: 'ALLOW', shadowDecision: 'ALLOW', shadowPolicyKeys: [], shadowPolicyIds: [] });
  });

  it('an agent without shadow policies pays nothing: no shadow set, no shadow fields', () => {
    const set = prepare([enforcedForbid, { ...shadowForbid, enabled: false }]);
    expect(set.shadow).toBeUndefined();
    const verdict = evaluate(set, call());
    expect(verdict.decision).toBe('ALLOW');
    expect(verdict).not.toHaveProperty('shadowDecision');
  });

  it('a shadow permit never lets a call through on a default-deny agent, and reports it would have', () => {
    const verdict = evaluate(prepare([shadowPermit], { defaultDecision: 'deny' }), call());
    expect(verdict).toMatchObject({ decision: 'DENY', shadowDecision: 'ALLOW', shadowPolicyKeys: ['shadow-permit'], shadowPolicyIds: ['db-permit'] });
  });

  it('an enforced forbid still denies; a shadow forbid on the same call is named beside it', () => {
    const both = prepare([enforcedForbid, { ...shadowForbid, tools: ['delete_repository'] }]);
    const verdict = evaluate(both, call({ tool: 'delete_repository', args: { owner: 'acme', repo: 'api' } }));
    expect(verdict).toMatchObject({
      decision: 'DENY', reason: 'No deletes', matchedPolicyKeys: ['enforced-forbid'],
      shadowDecision: 'DENY', shadowPolicyKeys: ['shadow-forbid'], shadowPolicyIds: ['db-shadow'],
    });
  });

  it('a shadow session limit counts what shadow would have allowed and trips when it would have, never denying', () => {
    const sessions = createInMemorySessionCounters();
    const limited = record({ id: 'db-limit', policyKey: 'two-per-session', name: 'Two per session', mode: 'shadow', conditions: { sessionLimit: { maxCalls: 2 } } });
    const set = prepare([limited]);
    const verdicts = [0, 1, 2].map(() => evaluate(set, call({ sessionId: 's-1' }), { sessions }));
    expect(verdicts.map((v) => v.decision)).toEqual(['ALLOW', 'ALLOW', 'ALLOW']);
    expect(verdicts.map((v) => v.shadowDecision)).toEqual(['ALLOW', 'ALLOW', 'DENY']);
    expect(verdicts[2]!.shadowPolicyKeys).toEqual(['two-per-session']);
    expect(sessions.read('s-1', ['two-per-session'])).toEqual([2]);
  });

  it('a shadow policy that cannot be compiled does not touch enforcement', () => {
    const broken = record({ id: 'db-broken', policyKey: 'broken', name: 'Broken', service: 'gone', mode: 'shadow' });
    const set = prepare([broken]);
    const verdict = evaluate(set, call());
    expect(verdict).toMatchObject({ decision: 'ALLOW', shadowDecision: 'DENY', shadowPolicyKeys: [] });
  });
});
