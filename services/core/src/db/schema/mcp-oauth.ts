import { index, jsonb, pgTable, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { agents } from './agents.ts';
import { memberKeys } from './member-keys.ts';
import { members } from './members.ts';

/**
 * Agent clients that registered themselves with Portcullis's own authorization server
 * (RFC 7591, decision 050). Public clients only: no client secret exists to store.
 */
export const mcpOAuthClients = pgTable('mcp_oauth_clients', {
  id: uuid('id').primaryKey().defaultRandom(),
  /** The client's own name (`client_name`), shown at consent; bounded at registration. */
  name: text('name').notNull(),
  redirectUris: jsonb('redirect_uris').$type<string[]>().notNull(),
  /** The registered metadata as answered to the client (no secrets). */
  metadata: jsonb('metadata').$type<Record<string, unknown>>().notNull(),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
});

/**
 * A member's consent: this client acts as this member of this agent, through the member key
 * presented at consent. Removing the member, revoking that key or deleting the agent removes
 * or stops the grant (decision 052).
 */
export const mcpOAuthGrants = pgTable('mcp_oauth_grants', {
  id: uuid('id').primaryKey().defaultRandom(),
  clientId: uuid('client_id').notNull().references(() => mcpOAuthClients.id, { onDelete: 'cascade' }),
  agentId: uuid('agent_id').notNull().references(() => agents.id, { onDelete: 'cascade' }),
  memberId: uuid('member_id').notNull().references(() => members.id, { onDelete: 'cascade' }),
  keyId: uuid('key_id').notNull().references(() => memberKeys.id, { onDelete: 'cascade' }),
  /** The RFC 8707 resource the tokens are bound to: this deployment's `/mcp`. */
  resource: text('resource').notNull(),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  lastUsedAt: timestamp('last_used_at', { withTimezone: true }),
  revokedAt: timestamp('revoked_at', { withTimezone: true }),
}, (t) => [index('mcp_oauth_grants_member_idx').on(t.memberId), index('mcp_oauth_grants_agent_idx').on(t.agentId)]);

export type McpOAuthSecretKind = 'code' | 'access' | 'refresh';

/**
 * Authorization codes, access tokens and refresh tokens of a grant. Only a SHA-256 digest of
 * each is stored, with the member's vault key wrapped under the value itself, so a database
 * dump plus the server secret opens nothing (decision 052). `usedAt` marks a code exchanged or
 * a refresh token rotated: presenting it again revokes the whole grant.
 */
export const mcpOAuthTokens = pgTable('mcp_oauth_tokens', {
  id: uuid('id').primaryKey().defaultRandom(),
  grantId: uuid('grant_id').notNull().references(() => mcpOAuthGrants.id, { onDelete: 'cascade' }),
  kind: text('kind').$type<McpOAuthSecretKind>().notNull(),
  tokenHash: text('token_hash').notNull().unique(),
  wrappedVaultKey: text('wrapped_vault_key'),
  /** Codes only: the PKCE S256 challenge and the redirect URI they were issued for. */
  codeChallenge: text('code_challenge'),
  redirectUri: text('redirect_uri'),
  expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
  usedAt: timestamp('used_at', { withTimezone: true }),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
}, (t) => [index('mcp_oauth_tokens_grant_idx').on(t.grantId)]);

/**
 * Signed consent requests already answered (issue 29): the digest of the signed request, so the
 * same request cannot be approved twice to mint several codes. Rows past `expires_at` can go.
 */
export const mcpOAuthConsentUses = pgTable('mcp_oauth_consent_uses', {
  requestDigest: text('request_digest').primaryKey(),
  usedAt: timestamp('used_at', { withTimezone: true }).notNull().defaultNow(),
  expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
});
