import { describe, expect, it } from 'vitest';
import { auditEntryOf, auditEntrySchema, redactPolicyIdentities, type AuditEntry } from './audit-entry.ts';
import { toAuditEntryMsg } from './grpc/entry-message.ts';
import { sinkEntryOf } from './sinks/sink-entry.ts';

/** The audit entry's shadow fields (decision 061) through core's checks, redaction and mappings. */
const entry: AuditEntry = {
  id: '0195f0a0-0000-7000-8000-000000000001', timestamp: '2026-10-01T12:00:00.000Z', agentId: 'a', agentName: 'Agent', memberId: 'm', memberName: 'm@example.com',
  memberKeyId: 'k', service: 'github', tool: 'get_me', action: 'GithubMCP::Action::"get_me"', resource: 'GithubMCP::Service::"github"', callerIp: '127.0.0.1',
  toolArgs: {}, decision: 'ALLOW', reason: 'No forbid policy matched', matchedPolicyIds: [], matchedPolicyNames: [], policyVersionIds: [], policyDbIds: [],
  durationMs: 3, principal: 'Portcullis::Member::"m"', shadowDecision: 'DENY', shadowPolicyIds: ['shadow-key'], shadowPolicyDbIds: ['pol-1'],
};

describe('shadow fields of an audit entry', () => {
  it('pass the writer\'s check as the schema does, and anything else in them is refused', () => {
    expect(auditEntryOf(entry)).toEqual(entry);
    expect(auditEntrySchema.parse(entry)).toEqual(entry);
    const { shadowDecision: _d, shadowPolicyIds: _k, shadowPolicyDbIds: _i, ...without } = entry;
    expect(auditEntryOf(without)).toEqual(without);
    for (const bad of [{ shadowDecision: 'MAYBE' }, { shadowDecision: '' }, { shadowPolicyIds: 'shadow-key' }, { shadowPolicyDbIds: [1] }]) {
      expect(auditEntryOf({ ...entry, ...bad }), JSON.stringify(bad)).toBeUndefined();
      expect(auditEntrySchema.safeParse({ ...entry, ...bad }).success, JSON.stringify(bad)).toBe(false);
    }
  });

  it('keep the shadow verdict but lose the shadow policies\' identities for readers who may not see policies', () => {
    expect(redactPolicyIdentities(entry)).toMatchObject({ shadowDecision: 'DENY', shadowPolicyIds: [], shadowPolicyDbIds: [] });
    const { shadowDecision: _d, shadowPolicyIds: _k, shadowPolicyDbIds: _i, ...without } = entry;
    expect(redactPolicyIdentities(without)).not.toHaveProperty('shadowPolicyIds');
  });

  it('travel in the gRPC message (empty when absent) and reach sinks without the store\'s database ids', () => {
    expect(toAuditEntryMsg(entry)).toMatchObject({ shadowDecision: 'DENY', shadowPolicyIds: ['shadow-key'], shadowPolicyDbIds: ['pol-1'] });
    const { shadowDecision: _d, shadowPolicyIds: _k, shadowPolicyDbIds: _i, ...without } = entry;
    expect(toAuditEntryMsg(without)).toMatchObject({ shadowDecision: '', shadowPolicyIds: [], shadowPolicyDbIds: [] });
    const sunk = sinkEntryOf(entry);
    expect(sunk).toMatchObject({ shadowDecision: 'DENY', shadowPolicyIds: ['shadow-key'] });
    expect(sunk).not.toHaveProperty('shadowPolicyDbIds');
  });
});
