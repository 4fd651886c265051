import { index, integer, pgTable, text, timestamp, uuid } from 'drizzle-orm/pg-core';

/**
 * One-time sign-in codes and links. Only keyed digests (HMAC with the server secret) of the
 * code and the link token are stored; each row is single use and expires. The link works only
 * in the browser that asked for it: `browserBindingHash` is the SHA-256 digest of the nonce
 * cookie set on that request (decision 027).
 */
export const signInCodes = pgTable('sign_in_codes', {
  id: uuid('id').primaryKey().defaultRandom(),
  email: text('email').notNull(),
  codeHash: text('code_hash').notNull(),
  tokenHash: text('token_hash').notNull().unique(),
  attempts: integer('attempts').notNull().default(0),
  requestIp: text('request_ip'),
  browserBindingHash: text('browser_binding_hash'),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
  consumedAt: timestamp('consumed_at', { withTimezone: true }),
}, (t) => [index('sign_in_codes_email_idx').on(t.email, t.createdAt)]);
