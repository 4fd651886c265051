import { sql } from 'drizzle-orm';
import { boolean, check, index, pgTable, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { agents } from './agents.ts';
import { users } from './users.ts';

export type AuditSinkKind = 'webhook' | 'otlp';

/**
 * Where an owner streams one agent's audit entries (issue 20, decision 055): an HTTPS webhook
 * (HMAC-signed with `secretSealed`) or an OTLP/HTTP logs endpoint (with `headersSealed`, a JSON
 * object of request headers such as an API key). Both are sealed with the server secret and
 * never returned. Each sink is a durable JetStream consumer named after its id; the delivery
 * outcome columns are written by the audit service's sink workers.
 */
export const auditSinks = pgTable('audit_sinks', {
  id: uuid('id').primaryKey().defaultRandom(),
  agentId: uuid('agent_id').notNull().references(() => agents.id, { onDelete: 'cascade' }),
  kind: text('kind').$type<AuditSinkKind>().notNull(),
  name: text('name').notNull(),
  url: text('url').notNull(),
  secretSealed: text('secret_sealed'),
  headersSealed: text('headers_sealed'),
  enabled: boolean('enabled').notNull().default(true),
  lastError: text('last_error'),
  lastErrorAt: timestamp('last_error_at', { withTimezone: true }),
  lastDeliveredAt: timestamp('last_delivered_at', { withTimezone: true }),
  createdBy: uuid('created_by').references(() => users.id, { onDelete: 'set null' }),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
}, (t) => [
  index('audit_sinks_agent_idx').on(t.agentId),
  check('audit_sinks_kind', sql`${t.kind} in ('webhook', 'otlp')`),
  check('audit_sinks_webhook_secret', sql`${t.kind} <> 'webhook' or ${t.secretSealed} is not null`),
]);
