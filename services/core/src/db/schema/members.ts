import { index, pgTable, text, timestamp, unique, uuid } from 'drizzle-orm/pg-core';
import { agents } from './agents.ts';
import { users } from './users.ts';

export type MemberRole = 'owner' | 'member';
export type MemberStatus = 'pending' | 'approved' | 'rejected';

export const members = pgTable('members', {
  id: uuid('id').primaryKey().defaultRandom(),
  agentId: uuid('agent_id').notNull().references(() => agents.id, { onDelete: 'cascade' }),
  userId: uuid('user_id').notNull().references(() => users.id, { onDelete: 'cascade' }),
  email: text('email').notNull(),
  role: text('role').$type<MemberRole>().notNull().default('member'),
  status: text('status').$type<MemberStatus>().notNull().default('pending'),
  /** X25519 public key that connection tokens are sealed to (base64). */
  vaultPublicKey: text('vault_public_key'),
  /** The matching private key, wrapped under a key derived from the member key. */
  vaultWrappedPrivateKey: text('vault_wrapped_private_key'),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  approvedAt: timestamp('approved_at', { withTimezone: true }),
}, (t) => [unique('members_agent_user_uq').on(t.agentId, t.userId), index('members_user_idx').on(t.userId)]);
