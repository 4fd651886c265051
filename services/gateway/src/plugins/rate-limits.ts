import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import rateLimit from '@fastify/rate-limit';
import { and, count, eq, gt, sql } from 'drizzle-orm';
import { ApiError, schema, type Database } from '@portcullis/core';
import type { GatewayConfig } from '../config.ts';

/** At most `max` requests per key in each fixed window of `windowMs`. */
export interface Limit { max: number; windowMs: number }

export interface AuthRateLimits {
  /** `POST /api/auth/magic-link`, per normalised e-mail address. */
  magicLinkPerAddress: Limit;
  /** `POST /api/auth/magic-link`, per client IP. */
  magicLinkPerIp: Limit;
  /** `POST /api/auth/verify`, per client IP. */
  verifyPerIp: Limit;
  /** `POST /api/auth/mfa/verify` and `/verify-setup` together, per client IP. */
  mfaPerIp: Limit;
}

/**
 * Limits on what a signed-in user can make the gateway do to other people (mail them) or
 * create in bulk, per rolling hour, counted in Postgres so every replica shares the count
 * (decision 026).
 */
export interface AbuseRateLimits {
  /** `POST /api/agents/:id/invite`, per inviting user, across all their agents. */
  invitesPerUser: Limit;
  /** `POST /api/agents/:id/invite`, per client IP, across users and agents. */
  invitesPerIp: Limit;
  /** `PUT /api/agents/:id/members/:memberId/key` (each re-wraps the vault), per user across agents. */
  keyRotationsPerUser: Limit;
  /** The same, per member (counted for the member's own requests: nobody else's spend it). */
  keyRotationsPerMember: Limit;
  /** `POST /api/agents`, per user. */
  agentsPerUser: Limit;
  /** `POST /api/agents/:id/sinks/:sinkId/test`, per user across agents (decision 058). */
  sinkTestsPerUser: Limit;
  /** The same, per agent. */
  sinkTestsPerAgent: Limit;
}

export type RateLimitConfig = Pick<GatewayConfig,
  'RATE_LIMIT_WINDOW_MINUTES' | 'RATE_LIMIT_MAGIC_LINK_PER_ADDRESS' | 'RATE_LIMIT_MAGIC_LINK_PER_IP' | 'RATE_LIMIT_VERIFY_PER_IP' | 'RATE_LIMIT_MFA_PER_IP'
  | 'RATE_LIMIT_INVITES_PER_USER' | 'RATE_LIMIT_INVITES_PER_IP' | 'RATE_LIMIT_AGENTS_PER_USER' | 'RATE_LIMIT_SINK_TESTS_PER_USER' | 'RATE_LIMIT_SINK_TESTS_PER_AGENT'
  | 'RATE_LIMIT_KEY_ROTATIONS_PER_USER' | 'RATE_LIMIT_KEY_ROTATIONS_PER_MEMBER'
  | 'RATE_LIMIT_OAUTH_REGISTER_PER_IP' | 'RATE_LIMIT_OAUTH_TOKEN_PER_IP'>;

const HOUR_MS = 60 * 60_000;

/** The abuse limits from configuration (one-hour windows). */
export function abuseRateLimitsOf(config: RateLimitConfig): AbuseRateLimits {
  return {
    invitesPerUser: { max: config.RATE_LIMIT_INVITES_PER_USER, windowMs: HOUR_MS },
    invitesPerIp: { max: config.RATE_LIMIT_INVITES_PER_IP, windowMs: HOUR_MS },
    keyRotationsPerUser: { max: config.RATE_LIMIT_KEY_ROTATIONS_PER_USER, windowMs: HOUR_MS },
    keyRotationsPerMember: { max: config.RATE_LIMIT_KEY_ROTATIONS_PER_MEMBER, windowMs: HOUR_MS },
    agentsPerUser: { max: config.RATE_LIMIT_AGENTS_PER_USER, windowMs: HOUR_MS },
    sinkTestsPerUser: { max: config.RATE_LIMIT_SINK_TESTS_PER_USER, windowMs: HOUR_MS },
    sinkTestsPerAgent: { max: config.RATE_LIMIT_SINK_TESTS_PER_AGENT, windowMs: HOUR_MS },
  };
}

/** The sign-in limits from configuration. */
export function authRateLimitsOf(config: RateLimitConfig): AuthRateLimits {
  const windowMs = config.RATE_LIMIT_WINDOW_MINUTES * 60_000;
  return {
    magicLinkPerAddress: { max: config.RATE_LIMIT_MAGIC_LINK_PER_ADDRESS, windowMs },
    magicLinkPerIp: { max: config.RATE_LIMIT_MAGIC_LINK_PER_IP, windowMs },
    verifyPerIp: { max: config.RATE_LIMIT_VERIFY_PER_IP, windowMs },
    mfaPerIp: { max: config.RATE_LIMIT_MFA_PER_IP, windowMs },
  };
}

/** A hook (onRequest or preHandler) that counts the request and refuses it once over the limit. */
export type LimitHook = (request: FastifyRequest, reply: FastifyReply) => Promise<void>;

/**
 * Builds named limiters on `@fastify/rate-limit`'s counters. Each limiter has its own counter
 * store, keyed by whatever `keyOf` returns (the client IP, an e-mail address…), so one route
 * can be limited on two keys at once — the plugin's per-route config allows only one. Over the
 * limit the answer is 429 `rate_limited` in the API's error shape with `Retry-After` (seconds).
 *
 * The store is the plugin's in-memory LRU: each replica counts on its own, so N replicas
 * allow N times the limit. Several replicas need a shared store (the plugin takes Redis, or
 * a custom store) — see ADR 002.
 */
export async function createLimiters(fastify: FastifyInstance) {
  if (!fastify.hasDecorator('createRateLimit')) await fastify.register(rateLimit, { global: false });
  /** `keyOf` defaults to the client IP (IPv6 grouped by /64, so hopping within a prefix does not help). */
  return function limiter(limit: Limit, what: string, keyOf?: (request: FastifyRequest) => string): LimitHook {
    const check = fastify.createRateLimit({ max: limit.max, timeWindow: limit.windowMs, ...(keyOf ? { keyGenerator: keyOf } : {}) });
    return async (request, reply) => {
      const result = await check(request);
      if (result.isAllowed || !result.isExceeded) return;
      const retryAfter = Math.max(1, result.ttlInSeconds);
      reply.header('retry-after', String(retryAfter));
      // The wait is in the header and details; the message stays the same for every caller.
      throw new ApiError('rate_limited', `Too many ${what}; try again later (see Retry-After).`, { retryAfterSeconds: retryAfter });
    };
  };
}

/** The client IP as the limits count it: IPv4 as is, IPv6 grouped by its /64 prefix (the plugin's own rule). */
export function clientIpKey(request: FastifyRequest): string {
  return rateLimit.normalizeIP(request.ip);
}

/** One shared limit: `action` counted per `subjectOf(request)` (e.g. `user:<id>`, or the client IP). */
export interface SharedLimitRule {
  limit: Limit;
  action: string;
  /** What is counted, for the 429 message: "Too many <what>…". */
  what: string;
  subjectOf: (request: FastifyRequest) => string;
}

/**
 * Builds limiters whose counts live in Postgres (`rate_limit_events`), so N gateway replicas
 * allow each limit once, not N times; each window is a rolling one. A limiter is a preHandler
 * (after the session check and validation) that checks all its rules at once and counts the
 * request against every rule only when none refuses it; a request the route itself then
 * refuses (not an owner, already a member…) still counts, so probing costs the same as sending.
 *
 * One transaction per request, serialised per (action, subject) by advisory locks taken in a
 * fixed order, so concurrent requests cannot all pass at the limit. The rows have no foreign
 * key: deleting an agent or a user gives nobody a fresh allowance.
 */
export function createSharedLimiters(deps: { db: Database; now?: () => number }) {
  const now = deps.now ?? Date.now;
  const events = schema.rateLimitEvents;

  /** Counts the request against every rule, or nothing; answers the refusing rule and the seconds to wait. */
  async function take(checks: Array<{ rule: SharedLimitRule; subject: string }>): Promise<{ rule: SharedLimitRule; retryAfter: number } | undefined> {
    const ordered = [...checks].sort((a, b) => `${a.rule.action}|${a.subject}`.localeCompare(`${b.rule.action}|${b.subject}`));
    return deps.db.transaction(async (tx) => {
      for (const { rule, subject } of ordered) {
        await tx.execute(sql`select pg_advisory_xact_lock(hashtextextended(${`${rule.action}|${subject}`}, 0))`);
      }
      const at = now();
      for (const { rule, subject } of ordered) {
        const since = new Date(at - rule.limit.windowMs);
        // Housekeeping: what has left the window no longer counts for anyone on this action.
        // Rows another request is deleting right now are skipped, so cleanups never wait on each other.
        await tx.execute(sql`delete from ${events} where ${events.id} in (
          select ${events.id} from ${events} where ${events.action} = ${rule.action} and ${events.occurredAt} <= ${since.toISOString()}::timestamptz
          limit 1000 for update skip locked)`);
        const [window] = await tx.select({
          n: count(),
          oldestMs: sql<number | null>`extract(epoch from min(${events.occurredAt})) * 1000`.mapWith(Number),
        }).from(events).where(and(eq(events.action, rule.action), eq(events.subject, subject), gt(events.occurredAt, since)));
        if (Number(window?.n ?? 0) >= rule.limit.max) {
          // The wait until the oldest counted event leaves the window.
          return { rule, retryAfter: Math.max(1, Math.ceil(((window?.oldestMs ?? at) + rule.limit.windowMs - at) / 1000)) };
        }
      }
      await tx.insert(events).values(ordered.map(({ rule, subject }) => ({ action: rule.action, subject, occurredAt: new Date(at) })));
      return undefined;
    });
  }

  /** A preHandler enforcing `rules`. Over a limit: 429 `rate_limited` with `Retry-After` (seconds), as the sign-in limits answer. */
  return function limiter(...rules: SharedLimitRule[]): LimitHook {
    return async (request, reply) => {
      const refused = await take(rules.map((rule) => ({ rule, subject: rule.subjectOf(request) })));
      if (!refused) return;
      reply.header('retry-after', String(refused.retryAfter));
      throw new ApiError('rate_limited', `Too many ${refused.rule.what}; try again later (see Retry-After).`, { retryAfterSeconds: refused.retryAfter });
    };
  };
}
