import { createHash, createHmac, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import { and, desc, eq, gt, isNull, sql } from 'drizzle-orm';
import { ApiError, schema, type Bus, type Database } from '@portcullis/core';
import type { Mailer } from '../mail/mailer.ts';
import { mfaStateOf, type DashboardSessionView, type MfaPolicy, type SessionUser } from './auth-types.ts';
import { createMfaService } from './mfa-service.ts';

export type { DashboardSessionView, MfaPendingReason, MfaPolicy, MfaState, SessionUser, SignedInUser } from './auth-types.ts';

const { dashboardSessions, members, signInCodes, users } = schema;

/** How long an e-mailed code or link stays usable (the link's browser-binding cookie lives as long). */
export const CODE_TTL_MS = 10 * 60_000;
const MAX_ATTEMPTS = 5;
/** `lastSeenAt` is written at most once a minute per session (sooner for very short idle windows), not on every request. */
const TOUCH_INTERVAL_MS = 60_000;

export interface SessionPolicy {
  /** A session unused this long has ended (`SESSION_IDLE_MINUTES`). */
  idleMs: number;
  /** A session older than this has ended, however active (`SESSION_MAX_MINUTES`). */
  maxMs: number;
}

/** Normalised e-mail: trimmed and lower-cased, so one person has one account. */
export function normaliseEmail(email: string): string {
  return email.trim().toLowerCase();
}

/**
 * Magic-link sign-in and server-side dashboard sessions. Codes and link tokens are stored as
 * HMACs under the server secret, are single use, expire after 10 minutes and allow a bounded
 * number of wrong guesses. Session cookies carry a random token; only its digest is stored.
 * A session ends on logout, after `idleMs` without a request, or `maxMs` after sign-in.
 * `now` is injectable so tests can move the clock.
 */
export function createAuthService(deps: {
  db: Database; mailer: Mailer; secret: string; publicUrl: string; sessions: SessionPolicy;
  /** Ended sessions are announced on it (`dashboard_session.ended`): every replica ends their live streams at once. */
  bus: Pick<Bus, 'publishChange'>;
  /** `MFA_REQUIRED`; default `off`. */
  mfaPolicy?: MfaPolicy;
  now?: () => number;
}) {
  const now = deps.now ?? Date.now;
  const touchAfterMs = Math.min(TOUCH_INTERVAL_MS, deps.sessions.idleMs / 10);
  const mfaPolicy = deps.mfaPolicy ?? 'off';
  const keyed = (value: string) => createHmac('sha256', deps.secret).update(value).digest('hex');
  const digest = (value: string) => createHash('sha256').update(value).digest('hex');
  const same = (a: string, b: string) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));
  /** True when the user behind `users.id` owns an agent; only asked when the policy is `owners`. */
  const ownsAgent = mfaPolicy === 'owners'
    ? sql<boolean>`exists (select 1 from ${members} where ${members.userId} = ${users.id} and ${members.role} = 'owner' and ${members.status} = 'approved')`
    : sql<boolean>`false`;
  /** The live-session condition, in SQL, for listings. */
  const liveAt = (at: number) => and(
    isNull(dashboardSessions.endedAt),
    gt(dashboardSessions.expiresAt, new Date(at)),
    gt(dashboardSessions.lastSeenAt, new Date(at - deps.sessions.idleMs)),
  );

  /** Tells every replica that these sessions ended, so their live streams end at once (decision 068). */
  function announceEnded(ended: Array<{ id: string; userId: string }>): void {
    for (const session of ended) deps.bus.publishChange({ kind: 'dashboard_session.ended', sessionId: session.id, userId: session.userId });
  }

  /** A session cookie's value: 256 random bits; only its digest is stored. */
  function newSessionToken(): { token: string; tokenHash: string } {
    const token = randomBytes(32).toString('base64url');
    return { token, tokenHash: digest(token) };
  }

  async function startSession(email: string, meta: { ip: string; userAgent: string | undefined }) {
    const [existing] = await deps.db.select().from(users).where(eq(users.email, email));
    const user = existing ?? (await deps.db.insert(users).values({ email }).onConflictDoNothing().returning())[0]
      ?? (await deps.db.select().from(users).where(eq(users.email, email)))[0]!;
    const { token, tokenHash } = newSessionToken();
    const at = now();
    // A new session has passed no MFA check; users without MFA are simply never asked for one.
    await deps.db.insert(dashboardSessions).values({
      tokenHash,
      userId: user.id,
      mfaSatisfied: false,
      ip: meta.ip,
      userAgent: meta.userAgent?.slice(0, 500) ?? null,
      createdAt: new Date(at),
      lastSeenAt: new Date(at),
      expiresAt: new Date(at + deps.sessions.maxMs),
    });
    const ownership = mfaPolicy === 'owners' ? (await deps.db.select({ ownsAgent }).from(users).where(eq(users.id, user.id)))[0] : undefined;
    const mfa = mfaStateOf({ mfaEnabled: user.mfaEnabled, mfaSatisfied: false, ownsAgent: Boolean(ownership?.ownsAgent) }, mfaPolicy);
    return { token, user: { id: user.id, email: user.email }, mfaRequired: mfa.pending !== null };
  }

  return {
    /** TOTP enrolment and challenge for signed-in sessions. */
    mfa: createMfaService({ db: deps.db, secret: deps.secret, now, newSessionToken, sessionEnded: (session) => announceEnded([session]) }),

    /**
     * Sends a code and a link; answers the same whether or not the address has an account.
     * The link is bound to `browserNonce` (the requesting browser's sign-in cookie): only a
     * request carrying the same nonce can exchange it. The code is not bound (decision 027).
     */
    async requestSignIn(rawEmail: string, ip: string, browserNonce: string): Promise<void> {
      const email = normaliseEmail(rawEmail);
      const code = String(randomInt(0, 100_000_000)).padStart(8, '0');
      const token = randomBytes(32).toString('base64url');
      await deps.db.insert(signInCodes).values({
        email, codeHash: keyed(`${email}:${code}`), tokenHash: keyed(token), requestIp: ip, browserBindingHash: digest(browserNonce),
        createdAt: new Date(now()), expiresAt: new Date(now() + CODE_TTL_MS),
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

    /**
     * Exchanges `{email, code}` or `{token}` for a new session; every failure is the same 401,
     * except a live link exchanged without its browser's nonce (`browserNonce`, the sign-in
     * cookie): 403 `link_other_browser`, and the link stays usable where it was requested —
     * so a link someone else sends cannot sign this browser into their account (login CSRF).
     * `mfaRequired` is true when the new session is MFA pending (challenge or enrolment).
     */
    async verify(input: { email: string; code: string } | { token: string }, meta: { ip: string; userAgent: string | undefined; browserNonce?: string | undefined }) {
      const invalid = new ApiError('unauthenticated', 'The code or link is invalid, already used, or expired. Request a new one.');
      const at = new Date(now());
      if ('token' in input) {
        const live = and(eq(signInCodes.tokenHash, keyed(input.token)), isNull(signInCodes.consumedAt), gt(signInCodes.expiresAt, at));
        const [row] = meta.browserNonce
          ? await deps.db.update(signInCodes).set({ consumedAt: at })
            .where(and(live, eq(signInCodes.browserBindingHash, digest(meta.browserNonce)))).returning()
          : [];
        if (row) return startSession(row.email, meta);
        const [elsewhere] = await deps.db.select({ id: signInCodes.id }).from(signInCodes).where(live).limit(1);
        if (!elsewhere) throw invalid;
        throw new ApiError('forbidden', 'This sign-in link works only in the browser that asked for it. Here, sign in with the code from the same e-mail instead.', { reason: 'link_other_browser' });
      }
      const email = normaliseEmail(input.email);
      const [row] = await deps.db.select().from(signInCodes)
        .where(and(eq(signInCodes.email, email), isNull(signInCodes.consumedAt), gt(signInCodes.expiresAt, at)))
        .orderBy(desc(signInCodes.createdAt)).limit(1);
      if (!row || row.attempts >= MAX_ATTEMPTS) throw invalid;
      if (!same(row.codeHash, keyed(`${email}:${input.code}`))) {
        await deps.db.update(signInCodes).set({ attempts: row.attempts + 1 }).where(eq(signInCodes.id, row.id));
        throw invalid;
      }
      const [consumed] = await deps.db.update(signInCodes).set({ consumedAt: at })
        .where(and(eq(signInCodes.id, row.id), isNull(signInCodes.consumedAt))).returning();
      if (!consumed) throw invalid;
      return startSession(email, meta);
    },

    /**
     * The user behind a session cookie with the session's MFA state, or undefined when the
     * session is unknown, ended, idle longer than `idleMs`, or older than `maxMs`.
     */
    async userOfSession(token: string): Promise<SessionUser | undefined> {
      const [row] = await deps.db
        .select({
          sessionId: dashboardSessions.id, lastSeenAt: dashboardSessions.lastSeenAt, expiresAt: dashboardSessions.expiresAt,
          endedAt: dashboardSessions.endedAt, mfaSatisfied: dashboardSessions.mfaSatisfied,
          id: users.id, email: users.email, mfaEnabled: users.mfaEnabled, ownsAgent,
        })
        .from(dashboardSessions).innerJoin(users, eq(users.id, dashboardSessions.userId))
        .where(eq(dashboardSessions.tokenHash, digest(token)));
      const at = now();
      if (!row || row.endedAt || row.expiresAt.getTime() <= at || row.lastSeenAt.getTime() + deps.sessions.idleMs <= at) return undefined;
      if (at - row.lastSeenAt.getTime() > touchAfterMs) {
        await deps.db.update(dashboardSessions).set({ lastSeenAt: new Date(at) }).where(eq(dashboardSessions.id, row.sessionId));
      }
      const mfa = mfaStateOf({ mfaEnabled: row.mfaEnabled, mfaSatisfied: row.mfaSatisfied, ownsAgent: Boolean(row.ownsAgent) }, mfaPolicy);
      return { id: row.id, email: row.email, sessionId: row.sessionId, mfaSatisfied: mfa.satisfied, mfa };
    },

    /** Logout: the session behind `token` ends, and with it its live streams on every replica. */
    async endSession(token: string): Promise<void> {
      announceEnded(await deps.db.update(dashboardSessions).set({ endedAt: new Date(now()) })
        .where(and(eq(dashboardSessions.tokenHash, digest(token)), isNull(dashboardSessions.endedAt)))
        .returning({ id: dashboardSessions.id, userId: dashboardSessions.userId }));
    },

    /** The user's live sessions, newest first. */
    async listSessions(userId: string): Promise<DashboardSessionView[]> {
      const rows = await deps.db.select().from(dashboardSessions)
        .where(and(eq(dashboardSessions.userId, userId), liveAt(now())))
        .orderBy(desc(dashboardSessions.createdAt));
      return rows.map((r) => ({
        id: r.id,
        createdAt: r.createdAt.toISOString(),
        lastSeenAt: r.lastSeenAt.toISOString(),
        expiresAt: new Date(Math.min(r.expiresAt.getTime(), r.lastSeenAt.getTime() + deps.sessions.idleMs)).toISOString(),
        ip: r.ip,
        userAgent: r.userAgent,
      }));
    },

    /** Ends one of the user's live sessions; false when it is not theirs, unknown, or already over. */
    async endSessionOfUser(userId: string, sessionId: string): Promise<boolean> {
      const ended = await deps.db.update(dashboardSessions).set({ endedAt: new Date(now()) })
        .where(and(eq(dashboardSessions.id, sessionId), eq(dashboardSessions.userId, userId), liveAt(now())))
        .returning({ id: dashboardSessions.id, userId: dashboardSessions.userId });
      announceEnded(ended);
      return ended.length > 0;
    },
  };
}

export type AuthService = ReturnType<typeof createAuthService>;
