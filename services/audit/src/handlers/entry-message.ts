import type { AuditEntry, AuditEntryMsg } from '@portcullis/core';

/** An entry as the `portcullis.audit.v1.AuditEntry` message carries it. */
export function toEntryMessage(entry: AuditEntry): AuditEntryMsg {
  return {
    id: entry.id,
    timestamp: entry.timestamp,
    agentId: entry.agentId,
    agentName: entry.agentName,
    memberId: entry.memberId,
    memberName: entry.memberName,
    memberKeyId: entry.memberKeyId,
    sessionId: entry.sessionId ?? '',
    service: entry.service,
    tool: entry.tool,
    action: entry.action,
    resource: entry.resource,
    callerIp: entry.callerIp,
    toolArgsJson: JSON.stringify(entry.toolArgs),
    decision: entry.decision,
    reason: entry.reason,
    matchedPolicyIds: entry.matchedPolicyIds,
    matchedPolicyNames: entry.matchedPolicyNames,
    matchedPolicyDbIds: entry.policyDbIds,
    policyVersionIds: entry.policyVersionIds,
    durationMs: entry.durationMs,
    principal: entry.principal,
  };
}
