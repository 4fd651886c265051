import { createHash, createHmac, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import { and, desc, eq, gt, isNull } from 'drizzle-orm';
import { ApiError, schema, type Database } from '@portcullis/core';
import type { Mailer } from '../mail/mailer.ts';

const { dashboardSessions, signInCodes, users } = schema;

const CODE_TTL_MS = 10 * 60_000;
const MAX_ATTEMPTS = 5;

export interface SignedInUser { id: string; email: string }

export interface SessionPolicy { idleMs: number; maxMs: number }

/** Normalised e-mail: trimmed and lower-cased, so one person has one account. */
export function normaliseEmail(email: string): string {
  return email.trim().toLowerCase();
}

/**
 * Magic-link sign-in and server-side dashboard sessions. Codes and link tokens are stored as
 * HMACs under the server secret, are single use, expire after 10 minutes and allow a bounded
 * number of wrong guesses. Session cookies carry a random token; only its digest is stored.
 */
export function createAuthService(deps: { db: Database; mailer: Mailer; secret: string; publicUrl: string; sessions: SessionPolicy }) {
  const keyed = (value: string) => createHmac('sha256', deps.secret).update(value).digest('hex');
  const digest = (value: string) => createHash('sha256').update(value).digest('hex');
  const same = (a: string, b: string) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

  async function startSession(email: string, meta: { ip: string; userAgent: string | undefined }) {
    const [existing] = await deps.db.select().from(users).where(eq(users.email, email));
    const user = existing ?? (await deps.db.insert(users).values({ email }).onConflictDoNothing().returning())[0]
      ?? (await deps.db.select().from(users).where(eq(users.email, email)))[0]!;
    const token = randomBytes(32).toString('base64url');
    const now = Date.now();
    await deps.db.insert(dashboardSessions).values({
      tokenHash: digest(token),
      userId: user.id,
      mfaSatisfied: !user.mfaEnabled,
      ip: meta.ip,
      userAgent: meta.userAgent?.slice(0, 500) ?? null,
      expiresAt: new Date(now + deps.sessions.maxMs),
    });
    return { token, user: { id: user.id, email: user.email }, mfaRequired: user.mfaEnabled };
  }

  return {
    /** Sends a code and a link; answers the same whether or not the address has an account. */
    async requestSignIn(rawEmail: string, ip: string): Promise<void> {
      const email = normaliseEmail(rawEmail);
      const code = String(randomInt(0, 100_000_000)).padStart(8, '0');
      const token = randomBytes(32).toString('base64url');
      await deps.db.insert(signInCodes).values({
        email, codeHash: keyed(`${email}:${code}`), tokenHash: keyed(token), requestIp: ip, expiresAt: new Date(Date.now() + CODE_TTL_MS),
      });
      const link = `${deps.publicUrl}/sign-in?token=${token}`;
      await deps.mailer.send({
        to: email,
        subject: `Your Portcullis sign-in code: ${code}`,
        text: `Your sign-in code is ${code}. It expires in 10 minutes.\n\nOr open this link to sign in:\n${link}\n\nIf you did not ask for this, ignore this message.`,
        code,
        link,
      });
    },

    /** Exchanges `{email, code}` or `{token}` for a new session; every failure is the same 401. */
    async verify(input: { email: string; code: string } | { token: string }, meta: { ip: string; userAgent: string | undefined }) {
      const invalid = new ApiError('unauthenticated', 'The code or link is invalid, already used, or expired. Request a new one.');
      const now = new Date();
      if ('token' in input) {
        const [row] = await deps.db.update(signInCodes).set({ consumedAt: now })
          .where(and(eq(signInCodes.tokenHash, keyed(input.token)), isNull(signInCodes.consumedAt), gt(signInCodes.expiresAt, now)))
          .returning();
        if (!row) throw invalid;
        return startSession(row.email, meta);
      }
      const email = normaliseEmail(input.email);
      const [row] = await deps.db.select().from(signInCodes)
        .where(and(eq(signInCodes.email, email), isNull(signInCodes.consumedAt), gt(signInCodes.expiresAt, now)))
        .orderBy(desc(signInCodes.createdAt)).limit(1);
      if (!row || row.attempts >= MAX_ATTEMPTS) throw invalid;
      if (!same(row.codeHash, keyed(`${email}:${input.code}`))) {
        await deps.db.update(signInCodes).set({ attempts: row.attempts + 1 }).where(eq(signInCodes.id, row.id));
        throw invalid;
      }
      const [consumed] = await deps.db.update(signInCodes).set({ consumedAt: now })
        .where(and(eq(signInCodes.id, row.id), isNull(signInCodes.consumedAt))).returning();
      if (!consumed) throw invalid;
      return startSession(email, meta);
    },

    /** The user behind a session cookie, or undefined when it is unknown, ended, idle too long or too old. */
    async userOfSession(token: string): Promise<(SignedInUser & { sessionId: string; mfaSatisfied: boolean }) | undefined> {
      const [row] = await deps.db
        .select({ sessionId: dashboardSessions.id, lastSeenAt: dashboardSessions.lastSeenAt, expiresAt: dashboardSessions.expiresAt, endedAt: dashboardSessions.endedAt, mfaSatisfied: dashboardSessions.mfaSatisfied, id: users.id, email: users.email })
        .from(dashboardSessions).innerJoin(users, eq(users.id, dashboardSessions.userId))
        .where(eq(dashboardSessions.tokenHash, digest(token)));
      const now = Date.now();
      if (!row || row.endedAt || row.expiresAt.getTime() <= now || row.lastSeenAt.getTime() + deps.sessions.idleMs <= now) return undefined;
      if (now - row.lastSeenAt.getTime() > 60_000) {
        await deps.db.update(dashboardSessions).set({ lastSeenAt: new Date(now) }).where(eq(dashboardSessions.id, row.sessionId));
      }
      return { id: row.id, email: row.email, sessionId: row.sessionId, mfaSatisfied: row.mfaSatisfied };
    },

    async endSession(token: string): Promise<void> {
      await deps.db.update(dashboardSessions).set({ endedAt: new Date() }).where(eq(dashboardSessions.tokenHash, digest(token)));
    },
  };
}

export type AuthService = ReturnType<typeof createAuthService>;
