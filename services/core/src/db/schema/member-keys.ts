import { index, pgTable, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { members } from './members.ts';

/** A member key record. The key itself is never stored: only its SHA-256 digest. */
export const memberKeys = pgTable('member_keys', {
  id: uuid('id').primaryKey().defaultRandom(),
  memberId: uuid('member_id').notNull().references(() => members.id, { onDelete: 'cascade' }),
  keyHash: text('key_hash').notNull().unique(),
  displaySuffix: text('display_suffix').notNull(),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  lastUsedAt: timestamp('last_used_at', { withTimezone: true }),
  revokedAt: timestamp('revoked_at', { withTimezone: true }),
}, (t) => [index('member_keys_member_idx').on(t.memberId)]);
