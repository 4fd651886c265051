import { bigint, pgTable, text, timestamp, uuid, boolean } from 'drizzle-orm/pg-core';

export const users = pgTable('users', {
  id: uuid('id').primaryKey().defaultRandom(),
  email: text('email').notNull().unique(),
  displayName: text('display_name'),
  mfaEnabled: boolean('mfa_enabled').notNull().default(false),
  /** TOTP secret, sealed with the server secret (`sealWithSecret`); set once enrolment is verified. */
  mfaSecretSealed: text('mfa_secret_sealed'),
  /** A secret handed out by setup and not yet confirmed by verify-setup. */
  mfaPendingSecretSealed: text('mfa_pending_secret_sealed'),
  /** The TOTP time step last accepted: a code cannot be replayed within its step. */
  mfaLastTimeStep: bigint('mfa_last_time_step', { mode: 'number' }),
  createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
});
