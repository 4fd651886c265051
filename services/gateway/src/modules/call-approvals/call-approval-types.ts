import { z } from 'zod';

/** The statuses a request is shown with (effective: an open request past its expiry is `expired`). */
export const CALL_APPROVAL_STATUSES = ['pending', 'approved', 'denied', 'expired', 'executed'] as const;
export type CallApprovalStatusFilter = (typeof CALL_APPROVAL_STATUSES)[number];

/** A call approval as the API shows it (the shared contract, decision 063). */
export const callApprovalSchema = z.object({
  id: z.string(),
  agentId: z.string(),
  memberId: z.string(),
  memberEmail: z.string(),
  service: z.string(),
  tool: z.string().describe('The tool name without the service prefix'),
  toolArgs: z.record(z.string(), z.unknown()).describe('The arguments, redacted as audit entries redact them'),
  argsDigest: z.string().describe('sha256 hex of the RFC 8785 canonical JSON of the arguments as sent'),
  policyId: z.string(),
  policyName: z.string(),
  policyVersionId: z.string(),
  status: z.enum(CALL_APPROVAL_STATUSES).describe('Effective status: a pending or approved request past expiresAt is expired'),
  reason: z.string().nullable().describe('The approver\'s comment (approve) or reason (deny)'),
  approverId: z.string().nullable(),
  approverEmail: z.string().nullable(),
  createdAt: z.string(),
  expiresAt: z.string().describe('When the request (pending) or the approval (approved) stops being usable'),
  decidedAt: z.string().nullable(),
  executedAt: z.string().nullable(),
  auditEntryIds: z.array(z.string()).describe('Audit entries of this request\'s events, oldest first'),
});

export type CallApproval = z.infer<typeof callApprovalSchema>;

/** `_meta["portcullis/approval"]` of a held call's tool result. */
export const APPROVAL_META_KEY = 'portcullis/approval';
