import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import rateLimit from '@fastify/rate-limit';
import { ApiError } from '@portcullis/core';
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

export type RateLimitConfig = Pick<GatewayConfig,
  'RATE_LIMIT_WINDOW_MINUTES' | 'RATE_LIMIT_MAGIC_LINK_PER_ADDRESS' | 'RATE_LIMIT_MAGIC_LINK_PER_IP' | 'RATE_LIMIT_VERIFY_PER_IP' | 'RATE_LIMIT_MFA_PER_IP'>;

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
