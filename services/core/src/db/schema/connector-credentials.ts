import { sql } from 'drizzle-orm';
import { check, pgTable, text, timestamp, unique, uuid } from 'drizzle-orm/pg-core';
import { agents } from './agents.ts';

/**
 * An owner's OAuth-app credentials for one connector of one agent ("your OAuth app"
 * connectors), and/or the webhook secret of the four connectors that take one. The client
 * secret and the webhook secret are sealed with the server secret (`sealWithSecret`); no
 * endpoint ever returns them. The client id and secret are set together or not at all (a row
 * may hold only a webhook secret), and a row always holds one or the other.
 */
export const connectorCredentials = pgTable('connector_credentials', {
  id: uuid('id').primaryKey().defaultRandom(),
  agentId: uuid('agent_id').notNull().references(() => agents.id, { onDelete: 'cascade' }),
  service: text('service').notNull(),
  clientId: text('client_id'),
  clientSecretSealed: text('client_secret_sealed'),
  webhookSecretSealed: text('webhook_secret_sealed'),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
}, (t) => [
  unique('connector_credentials_agent_service_uq').on(t.agentId, t.service),
  check('connector_credentials_client_pair', sql`(${t.clientId} is null) = (${t.clientSecretSealed} is null)`),
  check('connector_credentials_not_empty', sql`${t.clientId} is not null or ${t.webhookSecretSealed} is not null`),
]);
