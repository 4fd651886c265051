import { boolean, index, integer, jsonb, pgTable, text, timestamp, unique, uuid } from 'drizzle-orm/pg-core';
import { agents } from './agents.ts';
import { users } from './users.ts';

/** `require_approval`: a matching call waits for an owner's approval, then goes through once (decision 063). */
export type PolicyEffect = 'forbid' | 'permit' | 'require_approval';
/** `shadow`: evaluated on live traffic and audited, never enforced (decision 061). */
export type PolicyMode = 'enforce' | 'shadow';
export type PolicyPrincipal = { type: 'all_members' } | { type: 'members'; ids: string[] };

export const policies = pgTable('policies', {
  id: uuid('id').primaryKey().defaultRandom(),
  agentId: uuid('agent_id').notNull().references(() => agents.id, { onDelete: 'cascade' }),
  policyKey: text('policy_key').notNull(),
  name: text('name').notNull(),
  service: text('service').notNull(),
  effect: text('effect').$type<PolicyEffect>().notNull(),
  tools: jsonb('tools').$type<string[]>().notNull().default([]),
  tiers: jsonb('tiers').$type<string[]>().notNull().default([]),
  principal: jsonb('principal').$type<PolicyPrincipal>().notNull(),
  conditions: jsonb('conditions').$type<Record<string, unknown>>().notNull().default({}),
  denyMessage: text('deny_message'),
  enabled: boolean('enabled').notNull().default(true),
  mode: text('mode').$type<PolicyMode>().notNull().default('enforce'),
  /** When the policy last went into shadow mode (null while enforced): its shadow results count from here. */
  shadowSince: timestamp('shadow_since', { withTimezone: true }),
  /** The latest snapshot in `policy_versions`. */
  currentVersionId: uuid('current_version_id'),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
}, (t) => [unique('policies_agent_key_uq').on(t.agentId, t.policyKey)]);

/** Immutable snapshots: one per create, update, toggle and delete. */
export const policyVersions = pgTable('policy_versions', {
  id: uuid('id').primaryKey().defaultRandom(),
  agentId: uuid('agent_id').notNull().references(() => agents.id, { onDelete: 'cascade' }),
  /** Not a foreign key: history outlives a deleted policy. */
  policyId: uuid('policy_id').notNull(),
  version: integer('version').notNull(),
  change: text('change').$type<'create' | 'update' | 'toggle' | 'delete' | 'restore' | 'promote'>().notNull(),
  snapshot: jsonb('snapshot').$type<Record<string, unknown>>().notNull(),
  cedar: text('cedar').notNull(),
  authorUserId: uuid('author_user_id').references(() => users.id, { onDelete: 'set null' }),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
}, (t) => [unique('policy_versions_policy_version_uq').on(t.policyId, t.version), index('policy_versions_agent_idx').on(t.agentId)]);
