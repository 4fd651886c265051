import { z } from 'zod';

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

/** The reason recorded when no forbid policy matched. */
export const NO_FORBID_MATCHED = 'No forbid policy matched';
