import { createHmac, randomInt } from 'node:crypto';
import { and, eq, isNull, lt, or, sql } from 'drizzle-orm';
import { generateSecret, generateURI, verify as verifyTotp } from 'otplib';
import { ApiError, openWithSecret, schema, sealWithSecret, type Database } from '@portcullis/core';
import type { SessionUser } from './auth-types.ts';

const { dashboardSessions, mfaBackupCodes, users } = schema;

/** Label of the secret box for TOTP secrets: a value sealed for another purpose cannot be opened as one. */
const SEAL_LABEL = 'mfa-totp';
const ISSUER = 'Portcullis';
/** ±1 time step (30 s) of clock drift between the server and the authenticator app. */
const EPOCH_TOLERANCE_SECONDS = 30;
export const BACKUP_CODE_COUNT = 10;
/** Wrong codes one session may send to `mfa/verify`; the last one ends the session. */
export const MFA_MAX_ATTEMPTS = 5;
/** Backup-code alphabet without look-alikes (0/o, 1/l/i); 10 characters ≈ 49 bits. */
const BACKUP_ALPHABET = 'abcdefghjkmnpqrstuvwxyz23456789';

/**
 * TOTP enrolment and challenge. Secrets are sealed with the server secret; backup codes are
 * stored as HMACs and are single use; an accepted TOTP time step is remembered so a code
 * cannot be replayed within its step, and claiming it is one conditional UPDATE so two
 * concurrent requests cannot both spend the same code.
 */
export function createMfaService(deps: {
  db: Database; secret: string; now: () => number;
  /** A fresh session token and the digest stored for it (the auth service's). */
  newSessionToken: () => { token: string; tokenHash: string };
  /** Announces a session this service ended (too many wrong codes), so its live streams end. */
  sessionEnded: (session: { id: string; userId: string }) => void;
}) {
  const backupDigest = (userId: string, code: string) =>
    createHmac('sha256', deps.secret).update(`mfa-backup:${userId}:${normaliseBackupCode(code)}`).digest('hex');

  /** Re-enrolment from a session that has not passed the existing MFA would let a mailbox thief replace it. */
  function refuseUnverifiedReenrolment(user: SessionUser) {
    if (user.mfa.enabled && !user.mfa.satisfied) {
      throw new ApiError('forbidden', 'Complete the MFA challenge before changing the authenticator.', { reason: 'mfa_required' });
    }
  }

  /** The time step of a valid code (±1 step of drift), or undefined; steps up to `afterStep` count as spent. */
  async function acceptedTimeStep(secret: string, token: string, afterStep: number | null): Promise<number | undefined> {
    const result = await verifyTotp({
      secret, token, epoch: Math.floor(deps.now() / 1000), epochTolerance: EPOCH_TOLERANCE_SECONDS,
      ...(afterStep !== null ? { afterTimeStep: afterStep } : {}),
    });
    return result.valid && 'timeStep' in result ? result.timeStep : undefined;
  }

  /**
   * Counts a wrong code on the session row (one atomic UPDATE, so replicas and races agree).
   * A wrong code is the caller's input being wrong, not the session: 400 `invalid_request`
   * (`mfa_code_invalid`), so no client reads it as signed out. Only the last allowed attempt
   * ends the session, and that answer is 401 `unauthenticated` (`mfa_attempts_exceeded`).
   */
  async function recordFailure(user: SessionUser, field: 'code' | 'backupCode'): Promise<never> {
    const { sessionId } = user;
    const [row] = await deps.db.update(dashboardSessions)
      .set({ mfaFailedAttempts: sql`${dashboardSessions.mfaFailedAttempts} + 1` })
      .where(eq(dashboardSessions.id, sessionId))
      .returning({ count: dashboardSessions.mfaFailedAttempts });
    const count = row?.count ?? MFA_MAX_ATTEMPTS;
    if (count >= MFA_MAX_ATTEMPTS) {
      await deps.db.update(dashboardSessions).set({ endedAt: new Date(deps.now()) }).where(eq(dashboardSessions.id, sessionId));
      deps.sessionEnded({ id: sessionId, userId: user.id });
      throw new ApiError('unauthenticated', 'Too many wrong codes: this session has ended. Sign in again.', { reason: 'mfa_attempts_exceeded' });
    }
    throw new ApiError('invalid_request', 'The code is wrong or was already used.', { field, reason: 'mfa_code_invalid', attemptsLeft: MFA_MAX_ATTEMPTS - count });
  }

  return {
    /** Starts (re-)enrolment: a new secret, kept sealed as pending until `verifySetup` confirms it. */
    async setup(user: SessionUser): Promise<{ secret: string; otpauthUrl: string }> {
      refuseUnverifiedReenrolment(user);
      const secret = generateSecret();
      await deps.db.update(users).set({ mfaPendingSecretSealed: sealWithSecret(deps.secret, SEAL_LABEL, secret) }).where(eq(users.id, user.id));
      return { secret, otpauthUrl: generateURI({ issuer: ISSUER, label: user.email, secret }) };
    },

    /**
     * Confirms the pending secret with a code from the app: MFA is on, the previous backup
     * codes (if any) are replaced by new ones, and this session counts as MFA-satisfied under
     * a new token (as after `verify`). Returns the backup codes in clear — the only time they
     * are shown — and the session's new token, for the cookie.
     */
    async verifySetup(user: SessionUser, code: string): Promise<{ backupCodes: string[]; sessionToken: string }> {
      refuseUnverifiedReenrolment(user);
      const [row] = await deps.db.select({ pending: users.mfaPendingSecretSealed }).from(users).where(eq(users.id, user.id));
      const pending = row?.pending;
      if (!pending) throw new ApiError('conflict', 'No MFA setup is in progress: call POST /api/auth/mfa/setup first.');
      const timeStep = await acceptedTimeStep(openWithSecret(deps.secret, SEAL_LABEL, pending), code, null);
      // 400, not 401: the session is fine, the code is not (see `recordFailure`).
      if (timeStep === undefined) throw new ApiError('invalid_request', 'The code does not match the new authenticator; MFA stays off.', { field: 'code', reason: 'mfa_code_invalid' });
      const backupCodes = Array.from({ length: BACKUP_CODE_COUNT }, newBackupCode);
      const { token, tokenHash } = deps.newSessionToken();
      await deps.db.transaction(async (tx) => {
        const [enabled] = await tx.update(users).set({
          mfaEnabled: true,
          mfaSecretSealed: pending,
          mfaPendingSecretSealed: null,
          // The enrolment code is spent too: it cannot pass `verify` in another session.
          mfaLastTimeStep: sql`greatest(coalesce(${users.mfaLastTimeStep}, ${timeStep}), ${timeStep})`,
        }).where(and(eq(users.id, user.id), eq(users.mfaPendingSecretSealed, pending))).returning({ id: users.id });
        if (!enabled) throw new ApiError('conflict', 'A newer MFA setup was started meanwhile; confirm that one.');
        await tx.delete(mfaBackupCodes).where(eq(mfaBackupCodes.userId, user.id));
        await tx.insert(mfaBackupCodes).values(backupCodes.map((c) => ({ userId: user.id, codeHash: backupDigest(user.id, c) })));
        await tx.update(dashboardSessions).set({ mfaSatisfied: true, mfaFailedAttempts: 0, tokenHash }).where(eq(dashboardSessions.id, user.sessionId));
      });
      return { backupCodes, sessionToken: token };
    },

    /**
     * The sign-in challenge: a TOTP code (not one already accepted in its time step) or an
     * unused backup code marks the session MFA-satisfied and gives it a new token (ASVS
     * V3.2.1): the token that passed only the first factor stops working, and the new one is
     * answered for the cookie. A wrong code changes nothing but the session's failure count;
     * the `MFA_MAX_ATTEMPTS`th ends the session.
     */
    async verify(user: SessionUser, input: { code: string } | { backupCode: string }): Promise<{ sessionToken: string }> {
      if (!user.mfa.enabled) throw new ApiError('conflict', 'MFA is not enabled for this account: set it up with POST /api/auth/mfa/setup.');
      if ('code' in input) {
        const [row] = await deps.db.select({ sealed: users.mfaSecretSealed, lastStep: users.mfaLastTimeStep }).from(users).where(eq(users.id, user.id));
        if (!row?.sealed) throw new ApiError('conflict', 'MFA is not enabled for this account.');
        const timeStep = await acceptedTimeStep(openWithSecret(deps.secret, SEAL_LABEL, row.sealed), input.code, row.lastStep);
        if (timeStep === undefined) return recordFailure(user, 'code');
        const [claimed] = await deps.db.update(users).set({ mfaLastTimeStep: timeStep })
          .where(and(eq(users.id, user.id), or(isNull(users.mfaLastTimeStep), lt(users.mfaLastTimeStep, timeStep))))
          .returning({ id: users.id });
        if (!claimed) return recordFailure(user, 'code');
      } else {
        const [used] = await deps.db.update(mfaBackupCodes).set({ usedAt: new Date(deps.now()) })
          .where(and(eq(mfaBackupCodes.userId, user.id), eq(mfaBackupCodes.codeHash, backupDigest(user.id, input.backupCode)), isNull(mfaBackupCodes.usedAt)))
          .returning({ id: mfaBackupCodes.id });
        if (!used) return recordFailure(user, 'backupCode');
      }
      const { token, tokenHash } = deps.newSessionToken();
      const [rotated] = await deps.db.update(dashboardSessions).set({ mfaSatisfied: true, mfaFailedAttempts: 0, tokenHash })
        .where(and(eq(dashboardSessions.id, user.sessionId), isNull(dashboardSessions.endedAt))).returning({ id: dashboardSessions.id });
      if (!rotated) throw new ApiError('unauthenticated', 'This session has ended. Sign in again.');
      return { sessionToken: token };
    },
  };
}

export type MfaService = ReturnType<typeof createMfaService>;

/** Backup codes are compared case-insensitively, ignoring spaces and dashes. */
function normaliseBackupCode(code: string): string {
  return code.toLowerCase().replace(/[^a-z0-9]/g, '');
}

function newBackupCode(): string {
  const chars = Array.from({ length: 10 }, () => BACKUP_ALPHABET[randomInt(0, BACKUP_ALPHABET.length)]);
  return `${chars.slice(0, 5).join('')}-${chars.slice(5).join('')}`;
}
