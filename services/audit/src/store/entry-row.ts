import type { ApprovalEvent, AuditEntry } from '@portcullis/core';

/** One `audit_entries` row as it travels in JSONEachRow (snake_case columns). */
export interface AuditRow {
  id: string;
  /** `YYYY-MM-DD HH:MM:SS.mmm`, UTC. */
  timestamp: string;
  agent_id: string;
  agent_name: string;
  member_id: string;
  member_name: string;
  member_key_id: string;
  session_id: string | null;
  service: string;
  tool: string;
  action: string;
  resource: string;
  caller_ip: string;
  /** `toolArgs` as JSON text. */
  tool_args: string;
  decision: 'ALLOW' | 'DENY';
  reason: string;
  matched_policy_ids: string[];
  matched_policy_names: string[];
  policy_version_ids: string[];
  policy_db_ids: string[];
  duration_ms: number;
  principal: string;
  /**
   * The write-ahead stage: 0 = `decision` (recorded before the call went upstream),
   * 1 = `complete`. The table keeps the highest rank per entry (`ReplacingMergeTree(stage_rank)`).
   */
  stage_rank: number;
  /** The OAuth client of the call (decision 053); '' for a member key. */
  oauth_client_id: string;
  /** ALLOW | DENY with the shadow policies enforced; '' = the agent had none (decision 061). */
  shadow_decision: string;
  shadow_policy_ids: string[];
  shadow_policy_db_ids: string[];
  /** The call approval the entry is an event of, and which event; '' otherwise (decision 063). */
  approval_id: string;
  approval_event: string;
  /** The owner who approved or denied; '' otherwise. */
  approver_id: string;
  approver_name: string;
}

/** Every column, in table order; SELECTs name them rather than `*`. */
export const AUDIT_COLUMNS = [
  'id', 'timestamp', 'agent_id', 'agent_name', 'member_id', 'member_name', 'member_key_id', 'session_id',
  'service', 'tool', 'action', 'resource', 'caller_ip', 'tool_args', 'decision', 'reason',
  'matched_policy_ids', 'matched_policy_names', 'policy_version_ids', 'policy_db_ids', 'duration_ms', 'principal', 'stage_rank', 'oauth_client_id',
  'shadow_decision', 'shadow_policy_ids', 'shadow_policy_db_ids', 'approval_id', 'approval_event', 'approver_id', 'approver_name',
] as const satisfies ReadonlyArray<keyof AuditRow>;

/**
 * Formats an instant as a ClickHouse `DateTime64(3, 'UTC')` literal value. Both back ends
 * parse this form the same way, whereas a `Date` query parameter is sent by the HTTP client
 * as whole seconds.
 */
export function toClickHouseTime(instant: Date): string {
  return instant.toISOString().replace('T', ' ').slice(0, 23);
}

/** An ISO 8601 instant already in UTC to the millisecond, as the gateway writes every entry's. */
export const CANONICAL_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** An entry's timestamp as a `DateTime64(3, 'UTC')` value: rewritten in place when canonical (the writer does this per row), else parsed. */
function entryTime(timestamp: string): string {
  return CANONICAL_UTC.test(timestamp) ? `${timestamp.slice(0, 10)} ${timestamp.slice(11, 23)}` : toClickHouseTime(new Date(timestamp));
}

/** Reads a `DateTime64(3, 'UTC')` value back as ISO 8601 (`…T…Z`). */
export function fromClickHouseTime(value: string): string {
  return `${value.replace(' ', 'T')}Z`;
}

/** Maps an entry to its row; the timestamp is normalised to UTC milliseconds. */
export function toRow(entry: AuditEntry): AuditRow {
  return {
    id: entry.id,
    timestamp: entryTime(entry.timestamp),
    agent_id: entry.agentId,
    agent_name: entry.agentName,
    member_id: entry.memberId,
    member_name: entry.memberName,
    member_key_id: entry.memberKeyId,
    session_id: entry.sessionId ?? null,
    service: entry.service,
    tool: entry.tool,
    action: entry.action,
    resource: entry.resource,
    caller_ip: entry.callerIp,
    tool_args: JSON.stringify(entry.toolArgs),
    decision: entry.decision,
    reason: entry.reason,
    matched_policy_ids: entry.matchedPolicyIds,
    matched_policy_names: entry.matchedPolicyNames,
    policy_version_ids: entry.policyVersionIds,
    policy_db_ids: entry.policyDbIds,
    duration_ms: entry.durationMs,
    principal: entry.principal,
    stage_rank: entry.stage === 'decision' ? 0 : 1,
    oauth_client_id: entry.oauthClientId ?? '',
    shadow_decision: entry.shadowDecision ?? '',
    shadow_policy_ids: entry.shadowPolicyIds ?? [],
    shadow_policy_db_ids: entry.shadowPolicyDbIds ?? [],
    approval_id: entry.approvalId ?? '',
    approval_event: entry.approvalEvent ?? '',
    approver_id: entry.approverId ?? '',
    approver_name: entry.approverName ?? '',
  };
}

/** Maps a row back to the entry it was written from (`sessionId` absent when NULL). */
export function fromRow(row: AuditRow): AuditEntry {
  return {
    id: row.id,
    timestamp: fromClickHouseTime(row.timestamp),
    agentId: row.agent_id,
    agentName: row.agent_name,
    memberId: row.member_id,
    memberName: row.member_name,
    memberKeyId: row.member_key_id,
    ...(row.session_id === null ? {} : { sessionId: row.session_id }),
    ...(row.oauth_client_id ? { oauthClientId: row.oauth_client_id } : {}),
    service: row.service,
    tool: row.tool,
    action: row.action,
    resource: row.resource,
    callerIp: row.caller_ip,
    toolArgs: parseToolArgs(row.tool_args),
    decision: row.decision,
    reason: row.reason,
    matchedPolicyIds: row.matched_policy_ids,
    matchedPolicyNames: row.matched_policy_names,
    policyVersionIds: row.policy_version_ids,
    policyDbIds: row.policy_db_ids,
    durationMs: Number(row.duration_ms),
    principal: row.principal,
    ...(row.shadow_decision === 'ALLOW' || row.shadow_decision === 'DENY' || row.shadow_decision === 'APPROVAL_REQUIRED'
      ? { shadowDecision: row.shadow_decision, shadowPolicyIds: row.shadow_policy_ids, shadowPolicyDbIds: row.shadow_policy_db_ids }
      : {}),
    ...(row.approval_id ? { approvalId: row.approval_id, approvalEvent: row.approval_event as ApprovalEvent } : {}),
    ...(row.approver_id ? { approverId: row.approver_id, approverName: row.approver_name } : {}),
    ...(Number(row.stage_rank) === 0 ? { stage: 'decision' as const } : {}),
  };
}

function parseToolArgs(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
