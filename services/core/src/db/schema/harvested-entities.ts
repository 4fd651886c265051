import { index, jsonb, pgTable, text, timestamp, unique, uuid } from 'drizzle-orm/pg-core';
import { agents } from './agents.ts';
import { members } from './members.ts';

/**
 * Entities harvested from a connector for an agent (repositories, channels, teams…), addressed
 * by connector and entity type (`catalog.entityTypes`). They feed policy pickers and resource
 * conditions. `entityId` is the identifier policies match on (e.g. `acme/api`, `C123`).
 */
export const harvestedEntities = pgTable('harvested_entities', {
  id: uuid('id').primaryKey().defaultRandom(),
  agentId: uuid('agent_id').notNull().references(() => agents.id, { onDelete: 'cascade' }),
  service: text('service').notNull(),
  type: text('type').notNull(),
  entityId: text('entity_id').notNull(),
  name: text('name').notNull(),
  /** Extra display fields (e.g. `visibility`, `private`); never tokens. */
  attributes: jsonb('attributes').$type<Record<string, unknown>>().notNull().default({}),
  /** The member whose connection last harvested it; null when a webhook did. */
  harvestedBy: uuid('harvested_by').references(() => members.id, { onDelete: 'set null' }),
  harvestedAt: timestamp('harvested_at', { withTimezone: true }).notNull().defaultNow(),
}, (t) => [
  unique('harvested_entities_uq').on(t.agentId, t.service, t.type, t.entityId),
  index('harvested_entities_list_idx').on(t.agentId, t.service, t.type, t.name),
]);
