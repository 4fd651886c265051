import { jsonb, pgTable, text, timestamp, unique, uuid } from 'drizzle-orm/pg-core';
import { members } from './members.ts';
import type { OAuthFlowTarget } from './oauth-flows.ts';

/** How to refresh a connection's tokens: no secrets, those stay sealed elsewhere. */
export type ConnectionOAuth = Omit<OAuthFlowTarget, 'redirectUri' | 'userinfoEndpoint'>;

export type ConnectionStatus = 'active' | 'needs_reauth';

/** A member's OAuth connection to a connector. Tokens are sealed to the member's vault key. */
export const connections = pgTable('connections', {
  id: uuid('id').primaryKey().defaultRandom(),
  memberId: uuid('member_id').notNull().references(() => members.id, { onDelete: 'cascade' }),
  service: text('service').notNull(),
  identityInfo: jsonb('identity_info').$type<Record<string, unknown>>().notNull().default({}),
  /** Sealed box of `{accessToken, refreshToken?, expiresAt?}`; readable only with the member key. */
  sealedTokens: text('sealed_tokens').notNull(),
  /** Token endpoint and client of the grant, for refreshing; null for connections made without OAuth (seeds). */
  oauth: jsonb('oauth').$type<ConnectionOAuth>(),
  status: text('status').$type<ConnectionStatus>().notNull().default('active'),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  updatedAt: timestamp('updated_at', { withTimezone: true }).notNull().defaultNow(),
}, (t) => [unique('connections_member_service_uq').on(t.memberId, t.service)]);
