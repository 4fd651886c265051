import { describe, expect, it } from 'vitest';
import { compilePolicy, type StoredPolicyRecord } from './compile.ts';
import { evaluate, type AuthorizeInput } from './evaluate.ts';
import { preparePolicySet, type AgentPolicySnapshot } from './prepared-set.ts';
import { APPROVAL_PREVIEW_NOTE, compilePreview } from './preview.ts';
import { createInMemorySessionCounters } from './session-counters.ts';

/** Approval policies (decision 063): a permit the decision point reads as "allowed once approved". */
const AGENT_ID = '00000000-0000-4000-8000-0000000000a1';
let builds = 0;

const record = (overrides: Partial<StoredPolicyRecord>): StoredPolicyRecord => ({
  id: 'db-x', currentVersionId: 'ver-x', enabled: true, policyKey: 'x', name: 'X', service: 'github', effect: 'forbid',
  tools: ['issue_write'], tiers: [], principal: { type: 'all_members' }, denyMessage: null, ...overrides,
});
const approval = record({ id: 'db-approve', currentVersionId: 'ver-approve-1', policyKey: 'approve-issues', name: 'Approve issues', effect: 'require_approval' });
const forbid = record({ id: 'db-forbid', policyKey: 'no-issues', name: 'No issues', denyMessage: 'Issues are frozen' });

function prepare(policies: StoredPolicyRecord[], overrides: Partial<AgentPolicySnapshot> = {}) {
  builds += 1;
  return preparePolicySet({ agentId: AGENT_ID, agentStatus: 'active', policyVersion: 7, policies, ...overrides }, `approval-test:${builds}`);
}

const call = (overrides: Partial<AuthorizeInput> = {}): AuthorizeInput => ({
  agentId: AGENT_ID, member: { id: 'm-1', role: 'member', status: 'approved', email: 'm1@example.com' },
  service: 'github', tool: 'issue_write', args: { owner: 'acme', repo: 'api', title: 'Hi' }, nowMs: Date.UTC(2026, 0, 5, 10, 30), ...overrides,
});

describe('approval policies', () => {
  it('a matching approval policy makes the verdict APPROVAL_REQUIRED, naming the policy, its id and its version', () => {
    const verdict = evaluate(prepare([approval]), call());
    expect(verdict).toMatchObject({
      decision: 'APPROVAL_REQUIRED', reason: 'Approval required by policy "Approve issues"',
      approvalPolicyKeys: ['approve-issues'], approvalPolicyIds: ['db-approve'], approvalPolicyVersionIds: ['ver-approve-1'],
      matchedPolicyKeys: ['approve-issues'],
    });
    // Another tool is not held.
    const other = evaluate(prepare([approval]), call({ tool: 'get_me', args: {} }));
    expect(other.decision).toBe('ALLOW');
    expect(other).not.toHaveProperty('approvalPolicyKeys');
  });

  it('a matching forbid still wins', () => {
    const verdict = evaluate(prepare([approval, forbid]), call());
    expect(verdict).toMatchObject({ decision: 'DENY', reason: 'Issues are frozen' });
    expect(verdict).not.toHaveProperty('approvalPolicyKeys');
  });

  it('on a default-deny agent an approval policy is what lets the call through, after approval', () => {
    expect(evaluate(prepare([approval], { defaultDecision: 'deny' }), call()).decision).toBe('APPROVAL_REQUIRED');
    expect(evaluate(prepare([approval], { defaultDecision: 'deny' }), call({ tool: 'get_me', args: {} })).decision).toBe('DENY');
    // A permit of the same tool does not waive the approval.
    const permit = record({ id: 'db-permit', policyKey: 'permit-issues', name: 'Permit issues', effect: 'permit' });
    expect(evaluate(prepare([approval, permit], { defaultDecision: 'deny' }), call())).toMatchObject({
      decision: 'APPROVAL_REQUIRED', approvalPolicyKeys: ['approve-issues'], matchedPolicyKeys: ['approve-issues', 'permit-issues'],
    });
  });

  it('an agent without approval policies pays nothing: no extra set, the remembered outcome unchanged', () => {
    const set = prepare([forbid]);
    expect(set.shadow).toBeUndefined();
    const verdict = evaluate(set, call({ tool: 'get_me', args: {} }));
    expect(verdict.decision).toBe('ALLOW');
    expect(verdict).not.toHaveProperty('approvalPolicyKeys');
  });

  it('an APPROVAL_REQUIRED outcome is remembered per member like any other, and each verdict is a copy', () => {
    const set = prepare([approval]);
    const first = evaluate(set, call());
    first.approvalPolicyKeys!.push('tampered');
    const second = evaluate(set, call());
    expect(second.approvalPolicyKeys).toEqual(['approve-issues']);
  });

  it('conditions apply: an approval policy for one argument value holds only those calls; a pattern that may not run asks', () => {
    const onMain = record({
      id: 'db-main', policyKey: 'approve-main', name: 'Approve main', effect: 'require_approval', tools: ['issue_write'],
      conditions: { args: [{ path: 'repo', op: 'equals', value: 'main-repo' }] },
    });
    expect(evaluate(prepare([onMain]), call({ args: { owner: 'acme', repo: 'main-repo', title: 't' } })).decision).toBe('APPROVAL_REQUIRED');
    expect(evaluate(prepare([onMain]), call({ args: { owner: 'acme', repo: 'other', title: 't' } })).decision).toBe('ALLOW');
  });

  it('session limits count allowed calls only: held calls are not counted', () => {
    const sessions = createInMemorySessionCounters();
    const limited = record({ id: 'db-limit', policyKey: 'two', name: 'Two', effect: 'forbid', tools: ['issue_write'], conditions: { sessionLimit: { maxCalls: 1 } } });
    const set = prepare([approval, limited]);
    expect(evaluate(set, call({ sessionId: 's' }), { sessions }).decision).toBe('APPROVAL_REQUIRED');
    expect(sessions.read('s', ['two'])).toEqual([0]);
  });

  it('a shadow approval policy reports APPROVAL_REQUIRED as the shadow verdict and changes nothing', () => {
    const verdict = evaluate(prepare([{ ...approval, mode: 'shadow' }]), call());
    expect(verdict).toMatchObject({ decision: 'ALLOW', shadowDecision: 'APPROVAL_REQUIRED', shadowPolicyKeys: ['approve-issues'] });
  });

  it('compiles to an annotated Cedar permit; preview notes what it means', () => {
    const compiled = compilePolicy(approval);
    expect(compiled.errors).toEqual([]);
    expect(compiled.cedar).toContain('@approval("required")\npermit (');
    const preview = compilePreview({ name: 'A', service: 'github', effect: 'require_approval', tools: ['issue_write'], principal: { type: 'all_members' } });
    expect(preview.errors).toEqual([]);
    expect(preview.warnings).toContain(APPROVAL_PREVIEW_NOTE);
    expect(compilePreview({ name: 'A', service: 'github', effect: 'ask', principal: { type: 'all_members' } }).errors[0]).toMatch(/^effect: /);
  });
});
