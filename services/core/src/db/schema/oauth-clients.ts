import { pgTable, text, timestamp, unique, uuid } from 'drizzle-orm/pg-core';

/**
 * OAuth clients this deployment registered dynamically (RFC 7591) with a managed connector's
 * authorization server, one per (issuer, redirect URI), reused by every agent and member.
 * A client secret, when the server issues one, is sealed with the server secret.
 */
export const oauthClients = pgTable('oauth_clients', {
  id: uuid('id').primaryKey().defaultRandom(),
  service: text('service').notNull(),
  issuer: text('issuer').notNull(),
  redirectUri: text('redirect_uri').notNull(),
  clientId: text('client_id').notNull(),
  clientSecretSealed: text('client_secret_sealed'),
  tokenEndpointAuthMethod: text('token_endpoint_auth_method').notNull(),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
}, (t) => [unique('oauth_clients_issuer_redirect_uq').on(t.issuer, t.redirectUri)]);
