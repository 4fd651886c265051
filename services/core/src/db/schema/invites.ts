import { index, pgTable, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { agents } from './agents.ts';
import { users } from './users.ts';

/**
 * Invites to join an agent. The link carries a token signed with the server secret and bound
 * to this row's id, the agent and the invited e-mail; the row makes it single use and revocable.
 */
export const invites = pgTable('invites', {
  id: uuid('id').primaryKey().defaultRandom(),
  agentId: uuid('agent_id').notNull().references(() => agents.id, { onDelete: 'cascade' }),
  email: text('email').notNull(),
  invitedBy: uuid('invited_by').references(() => users.id, { onDelete: 'set null' }),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
  /** Set when the invite was used to join; a used invite cannot be used again. */
  consumedAt: timestamp('consumed_at', { withTimezone: true }),
  /** The member the invite created. */
  memberId: uuid('member_id'),
}, (t) => [index('invites_agent_idx').on(t.agentId)]);
