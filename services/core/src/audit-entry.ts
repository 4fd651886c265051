import { z } from 'zod';

/** The events of a call approval, each its own audit entry (decision 063). */
export const APPROVAL_EVENTS = ['proposed', 'approved', 'denied', 'expired', 'executed', 'returned'] as const;
export type ApprovalEvent = (typeof APPROVAL_EVENTS)[number];
/** Approval events that are not tool calls of their own: call counters leave them out. */
export const APPROVAL_EVENTS_NOT_CALLS: readonly ApprovalEvent[] = ['approved', 'denied', 'expired', 'returned'];

/**
 * One audit entry: exactly the fields of the interface specification's table, plus
 * `policyVersionIds` (the version in force of each matched policy) and `policyDbIds`
 * (database ids of the matched policies, which the audit `policy` filter compares).
 */
export const auditEntrySchema = z.object({
  id: z.string().uuid(),
  timestamp: z.string().datetime({ offset: true }),
  agentId: z.string(),
  agentName: z.string(),
  memberId: z.string(),
  memberName: z.string(),
  memberKeyId: z.string(),
  sessionId: z.string().optional(),
  /** The OAuth client (Portcullis's own authorization server) the call came through; absent for a member key (decision 053). */
  oauthClientId: z.string().max(64).optional(),
  service: z.string(),
  tool: z.string(),
  action: z.string(),
  resource: z.string(),
  callerIp: z.string(),
  toolArgs: z.record(z.string(), z.unknown()),
  decision: z.enum(['ALLOW', 'DENY']),
  reason: z.string(),
  matchedPolicyIds: z.array(z.string()),
  matchedPolicyNames: z.array(z.string()),
  policyVersionIds: z.array(z.string()),
  policyDbIds: z.array(z.string()),
  durationMs: z.number().nonnegative(),
  principal: z.string(),
  /**
   * What the verdict would have been with the agent's shadow policies enforced too (decision
   * 061); absent when the agent had no enabled shadow policy. Never the verdict itself.
   */
  shadowDecision: z.enum(['ALLOW', 'DENY', 'APPROVAL_REQUIRED']).optional(),
  /** Keys of the shadow policies that decided `shadowDecision` (like `matchedPolicyIds`). */
  shadowPolicyIds: z.array(z.string()).optional(),
  /** Their database ids (like `policyDbIds`). */
  shadowPolicyDbIds: z.array(z.string()).optional(),
  /** The call approval this entry is an event of (decision 063); absent for other entries. */
  approvalId: z.string().uuid().optional(),
  /** Which event: the held call, an owner's decision, its expiry, the approved call, its return. */
  approvalEvent: z.enum(APPROVAL_EVENTS).optional(),
  /** The owner who approved or denied (`approved` / `denied` events): user id and e-mail. */
  approverId: z.string().max(64).optional(),
  approverName: z.string().max(320).optional(),
  /**
   * Write-ahead audit: an allowed call is first recorded as `decision` (durably accepted
   * before anything is forwarded upstream), then again as `complete` under the same id once
   * the upstream answered. The store keeps the latest stage. Absent means `complete`.
   */
  stage: z.enum(['decision', 'complete']).optional(),
  /** W3C trace context of the call, when tracing is on (carried to the writer, never stored). */
  traceparent: z.string().max(200).optional(),
});

export type AuditEntry = z.infer<typeof auditEntrySchema>;
export type Decision = AuditEntry['decision'];

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const STRING_FIELDS = ['agentId', 'agentName', 'memberId', 'memberName', 'memberKeyId', 'service', 'tool', 'action', 'resource', 'callerIp', 'reason', 'principal'] as const;
const LIST_FIELDS = ['matchedPolicyIds', 'matchedPolicyNames', 'policyVersionIds', 'policyDbIds'] as const;
const isStringList = (value: unknown) => Array.isArray(value) && value.every((item) => typeof item === 'string');

/**
 * `value` as an audit entry when it has the entry's shape, else `undefined`: the check of
 * `auditEntrySchema` in plain comparisons, for the writer's hot path (tens of thousands of
 * trusted bus messages a second; zod costs several times more). Unknown keys are dropped,
 * as the schema drops them. `auditEntrySchema.safeParse` explains a refusal.
 */
export function auditEntryOf(value: unknown): AuditEntry | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const v = value as Record<string, unknown>;
  if (typeof v.id !== 'string' || !UUID.test(v.id)) return undefined;
  if (typeof v.timestamp !== 'string' || Number.isNaN(Date.parse(v.timestamp))) return undefined;
  for (const field of STRING_FIELDS) if (typeof v[field] !== 'string') return undefined;
  for (const field of LIST_FIELDS) if (!isStringList(v[field])) return undefined;
  if (typeof v.toolArgs !== 'object' || v.toolArgs === null || Array.isArray(v.toolArgs)) return undefined;
  if (v.decision !== 'ALLOW' && v.decision !== 'DENY') return undefined;
  if (typeof v.durationMs !== 'number' || !(v.durationMs >= 0)) return undefined;
  if (v.sessionId !== undefined && typeof v.sessionId !== 'string') return undefined;
  if (v.oauthClientId !== undefined && (typeof v.oauthClientId !== 'string' || v.oauthClientId.length > 64)) return undefined;
  if (v.shadowDecision !== undefined && v.shadowDecision !== 'ALLOW' && v.shadowDecision !== 'DENY' && v.shadowDecision !== 'APPROVAL_REQUIRED') return undefined;
  if (v.approvalId !== undefined && (typeof v.approvalId !== 'string' || !UUID.test(v.approvalId))) return undefined;
  if (v.approvalEvent !== undefined && !(APPROVAL_EVENTS as readonly unknown[]).includes(v.approvalEvent)) return undefined;
  if (v.approverId !== undefined && (typeof v.approverId !== 'string' || v.approverId.length > 64)) return undefined;
  if (v.approverName !== undefined && (typeof v.approverName !== 'string' || v.approverName.length > 320)) return undefined;
  if (v.shadowPolicyIds !== undefined && !isStringList(v.shadowPolicyIds)) return undefined;
  if (v.shadowPolicyDbIds !== undefined && !isStringList(v.shadowPolicyDbIds)) return undefined;
  if (v.stage !== undefined && v.stage !== 'decision' && v.stage !== 'complete') return undefined;
  if (v.traceparent !== undefined && (typeof v.traceparent !== 'string' || v.traceparent.length > 200)) return undefined;
  const entry: Record<string, unknown> = { id: v.id, timestamp: v.timestamp, toolArgs: v.toolArgs, decision: v.decision, durationMs: v.durationMs };
  for (const field of STRING_FIELDS) entry[field] = v[field];
  for (const field of LIST_FIELDS) entry[field] = v[field];
  if (v.sessionId !== undefined) entry.sessionId = v.sessionId;
  if (v.oauthClientId !== undefined) entry.oauthClientId = v.oauthClientId;
  if (v.shadowDecision !== undefined) entry.shadowDecision = v.shadowDecision;
  if (v.shadowPolicyIds !== undefined) entry.shadowPolicyIds = v.shadowPolicyIds;
  if (v.shadowPolicyDbIds !== undefined) entry.shadowPolicyDbIds = v.shadowPolicyDbIds;
  if (v.approvalId !== undefined) entry.approvalId = v.approvalId;
  if (v.approvalEvent !== undefined) entry.approvalEvent = v.approvalEvent;
  if (v.approverId !== undefined) entry.approverId = v.approverId;
  if (v.approverName !== undefined) entry.approverName = v.approverName;
  if (v.stage !== undefined) entry.stage = v.stage;
  if (v.traceparent !== undefined) entry.traceparent = v.traceparent;
  return entry as AuditEntry;
}

/** The reason recorded when no forbid policy matched. */
export const NO_FORBID_MATCHED = 'No forbid policy matched';

/**
 * What the gateway appends to a call's reason when the upstream failed
 * (`<verdict reason>; upstream error: <message>`, services/gateway `tool-call-service.ts`):
 * the dashboard's "agents with upstream errors" counts the entries whose reason contains it.
 */
export const UPSTREAM_ERROR_MARKER = '; upstream error: ';

/**
 * Reasons the decision point writes that name a policy (services/policy `evaluate.ts`):
 * `Denied by policy "<name>"` (a forbid without a deny message) and `Allowed by policy "<name>"`
 * (a permit on a default-deny agent), the name JSON-quoted, possibly followed by what the
 * gateway appended (`; upstream error: …`, `; outcome not recorded …`). The pattern is written
 * so that RE2 (the audit engine's regex library) reads it exactly as JavaScript does.
 */
export const POLICY_NAMED_REASON = /^(Denied by policy|Allowed by policy) "(?:[^"\\]|\\.)*"/;
/** `Denied: policy "<name>" could not be evaluated: <engine message>` (the message may quote policy text too). */
export const POLICY_FAILED_REASON = /^Denied: policy "(?:[^"\\]|\\.)*" could not be evaluated: /;
/** What a reader who may not see policy identities reads instead of a `POLICY_FAILED_REASON`. */
export const POLICY_FAILED_REDACTED = 'Denied: a policy could not be evaluated';

/**
 * The reason without the policy name the proxy wrote into it: `Denied by policy "Night freeze"`
 * reads `Denied by policy`, an evaluation failure `Denied: a policy could not be evaluated`.
 * Any other reason — an owner's `denyMessage` above all, which the caller's agent already got
 * as the tool result — is kept as it is. Decision 022.
 */
export function reasonWithoutPolicyNames(reason: string): string {
  if (POLICY_FAILED_REASON.test(reason)) return POLICY_FAILED_REDACTED;
  return reason.replace(POLICY_NAMED_REASON, '$1');
}

/**
 * The entry as a reader who may not see policy identities reads it (a non-owner member of a
 * trusted agent): matched policy keys, names, database ids and versions emptied, and the
 * reason without policy names. The audit export's SQL (`services/audit` `export-lines.ts`)
 * writes exactly this, and is tested against it. Decision 022.
 */
export function redactPolicyIdentities(entry: AuditEntry): AuditEntry {
  return {
    ...entry, reason: reasonWithoutPolicyNames(entry.reason), matchedPolicyIds: [], matchedPolicyNames: [], policyDbIds: [], policyVersionIds: [],
    ...(entry.shadowPolicyIds !== undefined ? { shadowPolicyIds: [] } : {}),
    ...(entry.shadowPolicyDbIds !== undefined ? { shadowPolicyDbIds: [] } : {}),
  };
}
