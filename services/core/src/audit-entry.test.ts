import { describe, expect, it } from 'vitest';
import { redactPolicyIdentities, reasonWithoutPolicyNames, type AuditEntry } from './audit-entry.ts';

const entry: AuditEntry = {
  id: '0195f0a0-0000-7000-8000-000000000001', timestamp: '2026-10-01T12:00:00.000Z', agentId: 'a1', agentName: 'Ops',
  memberId: 'm1', memberName: 'maria@example.com', memberKeyId: 'k1', sessionId: 's1', service: 'github', tool: 'delete_repository',
  action: 'GithubMCP::Action::"delete_repository"', resource: 'GithubMCP::Repository::"acme/api"', callerIp: '203.0.113.7',
  toolArgs: { repo: 'api' }, decision: 'DENY', reason: 'Denied by policy "Night freeze"', matchedPolicyIds: ['night-freeze'],
  matchedPolicyNames: ['Night freeze'], policyVersionIds: ['v1'], policyDbIds: ['p1'], durationMs: 3, principal: 'Portcullis::Member::"m1"',
};

describe('reasonWithoutPolicyNames (decision 022)', () => {
  it.each([
    // What the decision point writes (services/policy evaluate.ts), with the gateway's suffixes.
    ['Denied by policy "Night freeze"', 'Denied by policy'],
    ['Denied by policy "say \\"no\\" \\\\ twice"', 'Denied by policy'],
    ['Denied by policy "night-freeze"', 'Denied by policy'],
    ['Allowed by policy "Read only"', 'Allowed by policy'],
    ['Allowed by policy "Read only"; upstream error: boom', 'Allowed by policy; upstream error: boom'],
    ['Allowed by policy "Read only"; outcome not recorded: forwarded upstream, no completion received', 'Allowed by policy; outcome not recorded: forwarded upstream, no completion received'],
    ['Denied: policy "Secret guard" could not be evaluated: error in policy night-freeze:\nunknown attribute', 'Denied: a policy could not be evaluated'],
  ])('%j → %j', (reason, expected) => {
    expect(reasonWithoutPolicyNames(reason)).toBe(expected);
  });

  it.each([
    'Ask the owner before deleting anything', // an owner's denyMessage: the caller's agent got it as the tool result
    'No forbid policy matched',
    'Member is pending approval',
    'Denied: no policy permits this call',
    'Policy service unavailable: the call was denied because no verdict could be obtained',
    'Denied by policy', // already without a name
    'xDenied by policy "Night freeze"', // not the proxy's text
  ])('keeps %j as it is', (reason) => {
    expect(reasonWithoutPolicyNames(reason)).toBe(reason);
  });
});

describe('redactPolicyIdentities', () => {
  it('empties every policy identity, drops the policy name from the reason, and keeps the rest', () => {
    expect(redactPolicyIdentities(entry)).toEqual({
      ...entry, reason: 'Denied by policy', matchedPolicyIds: [], matchedPolicyNames: [], policyDbIds: [], policyVersionIds: [],
    });
    expect(entry.matchedPolicyIds).toEqual(['night-freeze']);
  });
});
