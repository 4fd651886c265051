import { index, jsonb, pgTable, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { agents } from './agents.ts';
import { members } from './members.ts';
import { users } from './users.ts';

/** What the callback needs to finish a flow: where to exchange the code, as whom, for what. */
export interface OAuthFlowTarget {
  /** Authorization server issuer and its token endpoint, from discovery at connect time. */
  issuer: string;
  tokenEndpoint: string;
  userinfoEndpoint?: string;
  /** How the client authenticates at the token endpoint (`client_secret_basic`, `client_secret_post`, `none`). */
  tokenEndpointAuthMethod: string;
  /** Where the client id comes from: the owner's app, a dynamic registration, or the operator's platform app. */
  clientSource: 'own_app' | 'registered' | 'platform';
  clientId: string;
  /** RFC 8707 resource indicator: the upstream MCP server URL. */
  resource?: string;
  redirectUri: string;
}

/**
 * A pending OAuth connect flow. The `state` sent to the provider is random and single-use;
 * only its SHA-256 digest is stored. The PKCE verifier is sealed with the server secret.
 * The row is deleted when the callback consumes it, and ignored once expired.
 */
export const oauthFlows = pgTable('oauth_flows', {
  id: uuid('id').primaryKey().defaultRandom(),
  stateDigest: text('state_digest').notNull().unique(),
  userId: uuid('user_id').notNull().references(() => users.id, { onDelete: 'cascade' }),
  agentId: uuid('agent_id').notNull().references(() => agents.id, { onDelete: 'cascade' }),
  memberId: uuid('member_id').notNull().references(() => members.id, { onDelete: 'cascade' }),
  service: text('service').notNull(),
  codeVerifierSealed: text('code_verifier_sealed').notNull(),
  target: jsonb('target').$type<OAuthFlowTarget>().notNull(),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
}, (t) => [index('oauth_flows_expires_idx').on(t.expiresAt)]);
