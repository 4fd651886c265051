import { bigserial, index, pgTable, text, timestamp } from 'drizzle-orm/pg-core';

/**
 * One row per counted action (an invite sent, an agent created…) for the limits every gateway
 * replica must share (decision 026). `subject` is who is counted: `user:<id>` or a client IP
 * (IPv6 grouped by /64). No foreign key on purpose: deleting an agent or a user must not give
 * its creator a fresh allowance. Rows older than their limit's window are deleted as new ones
 * are counted.
 */
export const rateLimitEvents = pgTable('rate_limit_events', {
  id: bigserial('id', { mode: 'number' }).primaryKey(),
  action: text('action').notNull(),
  subject: text('subject').notNull(),
  occurredAt: timestamp('occurred_at', { withTimezone: true }).notNull(),
}, (t) => [
  index('rate_limit_events_subject_idx').on(t.action, t.subject, t.occurredAt),
  index('rate_limit_events_age_idx').on(t.action, t.occurredAt),
]);
