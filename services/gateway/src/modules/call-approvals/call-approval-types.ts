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

const argPathSchema = z.array(z.union([z.string(), z.number().int()]));

/** A secret-looking span of one string value of the arguments (decision 067). */
export const argSecretSpanSchema = z.object({
  path: argPathSchema.describe('Where the value sits in the arguments: keys and array indexes from the top'),
  start: z.number().int().describe('Offset (UTF-16 code units) where the span starts in that string'),
  end: z.number().int().describe('Offset where it ends (exclusive)'),
  kind: z.string().describe('The rule that found it (`github-token`, `aws-access-token`, …), or `secret-name` for a value under a key that names a secret'),
});

/** Who unmasked a request's arguments, and when (decision 067). */
export const callApprovalRevealSchema = z.object({ userId: z.string().nullable(), userEmail: z.string(), revealedAt: z.string() });

/**
 * A call approval as its owners see it (decision 067): the shared record, plus the exact
 * arguments with each secret-looking span masked, while the request is open or approved, and
 * who revealed them.
 */
export const callApprovalOwnerSchema = callApprovalSchema.extend({
  args: z.record(z.string(), z.unknown()).nullable()
    .describe('The exact arguments that will run, each secret-looking span masked (its public prefix and `••••`, e.g. `ghp_••••`); null once the request is executed, denied or expired (its exact arguments are destroyed; only the redacted `toolArgs` remain)'),
  secretSpans: z.array(argSecretSpanSchema).describe('Where `args` carries masked spans (offsets into the masked strings); POST …/reveal answers the unmasked values'),
  reveals: z.array(callApprovalRevealSchema).describe('Each time an owner revealed the masked spans, oldest first (the newest 50)'),
});

export type CallApprovalForOwner = z.infer<typeof callApprovalOwnerSchema>;

/** What POST …/call-approvals/:approvalId/reveal answers (decision 067). */
export const callApprovalRevealAnswerSchema = z.object({
  approvalId: z.string(),
  args: z.record(z.string(), z.unknown()).describe('The exact arguments that will run, unmasked'),
  secretSpans: z.array(argSecretSpanSchema).describe('The secret-looking spans at their places in `args`'),
  reveal: callApprovalRevealSchema.describe('This reveal, as recorded'),
});

export type CallApprovalRevealAnswer = z.infer<typeof callApprovalRevealAnswerSchema>;

/** `_meta["portcullis/approval"]` of a held call's tool result. */
export const APPROVAL_META_KEY = 'portcullis/approval';
