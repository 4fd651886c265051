import { pgTable, text, timestamp, unique, uuid } from 'drizzle-orm/pg-core';
import { agents } from './agents.ts';

/**
 * An owner's OAuth-app credentials for one connector of one agent ("your OAuth app"
 * connectors). The client secret and the webhook secret are sealed with the server secret
 * (`sealWithSecret`); no endpoint ever returns them.
 */
export const connectorCredentials = pgTable('connector_credentials', {
  id: uuid('id').primaryKey().defaultRandom(),
  agentId: uuid('agent_id').notNull().references(() => agents.id, { onDelete: 'cascade' }),
  service: text('service').notNull(),
  clientId: text('client_id').notNull(),
  clientSecretSealed: text('client_secret_sealed').notNull(),
  webhookSecretSealed: text('webhook_secret_sealed'),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
}, (t) => [unique('connector_credentials_agent_service_uq').on(t.agentId, t.service)]);
