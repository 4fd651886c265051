import { index, pgTable, primaryKey, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { users } from './users.ts';

/**
 * Who owned an agent when it was deleted. Deleting an agent removes its row and, by cascade,
 * its members; its audit entries stay (retention is indefinite), and these rows are what
 * still lets its former owners read and export them (decision 023). `agentId` has no foreign
 * key: the agent is gone. A user who is deleted loses the access with them.
 */
export const deletedAgentOwners = pgTable('deleted_agent_owners', {
  agentId: uuid('agent_id').notNull(),
  userId: uuid('user_id').notNull().references(() => users.id, { onDelete: 'cascade' }),
  /** The agent's name when it was deleted (its entries carry their own copy). */
  agentName: text('agent_name').notNull(),
  deletedAt: timestamp('deleted_at', { withTimezone: true }).notNull().defaultNow(),
}, (t) => [primaryKey({ columns: [t.agentId, t.userId] }), index('deleted_agent_owners_user_idx').on(t.userId)]);
