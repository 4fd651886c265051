import type { AuditEntry } from '../audit-entry.ts';
import type { AuditEntryMsg } from './types.ts';

/**
 * An entry as the `portcullis.audit.v1.AuditEntry` message carries it (the audit service's
 * answers; the gateway's live stream, so a streamed entry reads exactly like a listed one).
 * The timestamp is normalised to UTC milliseconds, as the store returns it.
 */
export function toAuditEntryMsg(entry: AuditEntry): AuditEntryMsg {
  const at = Date.parse(entry.timestamp);
  return {
    id: entry.id,
    timestamp: Number.isNaN(at) ? entry.timestamp : new Date(at).toISOString(),
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
    oauthClientId: entry.oauthClientId ?? '',
    shadowDecision: entry.shadowDecision ?? '',
    shadowPolicyIds: entry.shadowPolicyIds ?? [],
    shadowPolicyDbIds: entry.shadowPolicyDbIds ?? [],
    approvalId: entry.approvalId ?? '',
    approvalEvent: entry.approvalEvent ?? '',
    approverId: entry.approverId ?? '',
    approverName: entry.approverName ?? '',
  };
}
