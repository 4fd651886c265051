import { boolean, index, integer, pgTable, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { users } from './users.ts';

/** Server-side dashboard sessions; the cookie carries a random token, only its digest is stored. */
export const dashboardSessions = pgTable('dashboard_sessions', {
  id: uuid('id').primaryKey().defaultRandom(),
  tokenHash: text('token_hash').notNull().unique(),
  userId: uuid('user_id').notNull().references(() => users.id, { onDelete: 'cascade' }),
  mfaSatisfied: boolean('mfa_satisfied').notNull().default(false),
  /** Wrong MFA codes sent in this session; counted here so every replica sees the same number. */
  mfaFailedAttempts: integer('mfa_failed_attempts').notNull().default(0),
  userAgent: text('user_agent'),
  ip: text('ip'),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  lastSeenAt: timestamp('last_seen_at', { withTimezone: true }).notNull().defaultNow(),
  expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
  endedAt: timestamp('ended_at', { withTimezone: true }),
}, (t) => [index('dashboard_sessions_user_idx').on(t.userId)]);
