import { sql } from 'drizzle-orm';
import { check, index, jsonb, pgTable, text, timestamp, uniqueIndex, uuid } from 'drizzle-orm/pg-core';
import { agents } from './agents.ts';
import { members } from './members.ts';
import { users } from './users.ts';

/** Stored status; `expired` is also what a `pending` or `approved` request past `expires_at` reads as. */
export type CallApprovalStatus = 'pending' | 'approved' | 'denied' | 'expired' | 'executed';

/**
 * A tool call held for an owner's approval by a `require_approval` policy (issue 20, decision
 * 063): a single-use grant bound to (agent, member, service, tool, `args_digest`,
 * `binding_versions`) and `expires_at`. `tool_args` are redacted as audit redacts them; the
 * digest is of the arguments as sent. At most one pending request per binding (the partial
 * unique index), so two replicas proposing at once agree on one.
 */
export const callApprovals = pgTable('call_approvals', {
  id: uuid('id').primaryKey(),
  agentId: uuid('agent_id').notNull().references(() => agents.id, { onDelete: 'cascade' }),
  memberId: uuid('member_id').notNull().references(() => members.id, { onDelete: 'cascade' }),
  memberEmail: text('member_email').notNull(),
  /** The key record the held call came with (audit entries of the request's events name it). */
  memberKeyId: text('member_key_id').notNull(),
  service: text('service').notNull(),
  tool: text('tool').notNull(),
  toolArgs: jsonb('tool_args').$type<Record<string, unknown>>().notNull(),
  /**
   * The held call's exact arguments, sealed under the server secret, so the approver sees what
   * will run (issue 29). Set while the request is open or approved; cleared (null) once the
   * approval is used, denied or expires — the audit keeps only the redacted form.
   */
  sealedArgs: text('sealed_args'),
  /** sha256 hex of the RFC 8785 canonical JSON of the arguments. */
  argsDigest: text('args_digest').notNull(),
  /** The first matched approval policy (by key): what the page shows. */
  policyId: uuid('policy_id').notNull(),
  policyKey: text('policy_key').notNull(),
  policyName: text('policy_name').notNull(),
  policyVersionId: text('policy_version_id').notNull(),
  /** Every matched approval policy's version id, sorted, joined by `,`: a policy change is another binding. */
  bindingVersions: text('binding_versions').notNull(),
  status: text('status').$type<CallApprovalStatus>().notNull().default('pending'),
  /** The approver's comment (approve) or reason (deny). */
  reason: text('reason'),
  approverId: uuid('approver_id').references(() => users.id, { onDelete: 'set null' }),
  approverEmail: text('approver_email'),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  /** Pending: when the request closes; approved: when the grant stops being usable. */
  expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
  decidedAt: timestamp('decided_at', { withTimezone: true }),
  executedAt: timestamp('executed_at', { withTimezone: true }),
  /** When the agent was told the request expired: from then on the binding proposes anew. */
  expiryReportedAt: timestamp('expiry_reported_at', { withTimezone: true }),
  /** Audit entries of this request's events, oldest first. */
  auditEntryIds: jsonb('audit_entry_ids').$type<string[]>().notNull().default([]),
}, (t) => [
  index('call_approvals_binding_idx').on(t.agentId, t.memberId, t.service, t.tool, t.argsDigest, t.createdAt),
  index('call_approvals_agent_idx').on(t.agentId, t.createdAt),
  index('call_approvals_open_idx').on(t.status, t.expiresAt),
  uniqueIndex('call_approvals_one_pending_uq')
    .on(t.agentId, t.memberId, t.service, t.tool, t.argsDigest, t.bindingVersions)
    .where(sql`${t.status} = 'pending'`),
  check('call_approvals_status', sql`${t.status} in ('pending', 'approved', 'denied', 'expired', 'executed')`),
]);

/**
 * When the owners of an agent were last mailed about its approval requests (decision 063): at
 * most one mail per agent a minute, claimed with a conditional update so replicas agree.
 */
export const callApprovalMail = pgTable('call_approval_mail', {
  agentId: uuid('agent_id').primaryKey().references(() => agents.id, { onDelete: 'cascade' }),
  lastSentAt: timestamp('last_sent_at', { withTimezone: true }).notNull(),
});

/**
 * Each time a person unmasked a secret-looking span of a held call's arguments (issue 29): who,
 * when, which request. Kept after the sealed arguments are destroyed.
 */
export const callApprovalReveals = pgTable('call_approval_reveals', {
  id: uuid('id').primaryKey().defaultRandom(),
  approvalId: uuid('approval_id').notNull().references(() => callApprovals.id, { onDelete: 'cascade' }),
  userId: uuid('user_id').references(() => users.id, { onDelete: 'set null' }),
  userEmail: text('user_email').notNull(),
  revealedAt: timestamp('revealed_at', { withTimezone: true }).notNull().defaultNow(),
}, (t) => [index('call_approval_reveals_approval_idx').on(t.approvalId, t.revealedAt)]);
