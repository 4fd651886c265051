import { bigint, jsonb, pgTable, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { users } from './users.ts';

export const agents = pgTable('agents', {
  id: uuid('id').primaryKey().defaultRandom(),
  name: text('name').notNull(),
  tags: jsonb('tags').$type<string[]>().notNull().default([]),
  type: text('type').$type<'standard' | 'trusted'>().notNull().default('standard'),
  status: text('status').$type<'active' | 'disabled'>().notNull().default('active'),
  /** Connector keys enabled on the agent. */
  allowedServices: jsonb('allowed_services').$type<string[]>().notNull().default([]),
  /**
   * What a call no policy decides gets: `allow` (the spec's "no forbid policy matched" — the
   * default) or `deny` (then only `permit` policies let calls through; forbids still win).
   */
  defaultDecision: text('default_decision').$type<'allow' | 'deny'>().notNull().default('allow'),
  /** Bumped on every policy change; the PDP uses it to refuse stale caches. */
  policyVersion: bigint('policy_version', { mode: 'number' }).notNull().default(0),
  createdBy: uuid('created_by').references(() => users.id, { onDelete: 'set null' }),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
});
