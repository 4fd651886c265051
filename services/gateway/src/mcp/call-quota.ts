import { createTokenBuckets, type BucketRate } from '../plugins/token-buckets.ts';

/**
 * `/mcp`'s quotas (issue 29, decision 069), in this replica's memory: calls per member key and
 * per agent (token buckets: a steady rate with a burst above it), and failed authentications
 * per client IP. A real agent stays far below them; a flood meets them at once.
 */
export interface McpQuotaLimits {
  perKey: BucketRate;
  perAgent: BucketRate;
  /** Requests with an unknown, revoked or expired key or token, per client IP. */
  authFailuresPerIp: BucketRate;
  /**
   * How long a refused request is held before its 429 goes out. A client that ignores
   * Retry-After and tries again at once then sends at most one request a penalty per
   * connection, so refusals cannot become a load of their own (each is audited, too).
   */
  penaltyMs: number;
}

export interface QuotaRefusal {
  /** What ran dry, for the reason text: `member key`, `agent` or `client address`. */
  scope: 'member key' | 'agent' | 'client address';
  retryAfterSeconds: number;
  /** The reason, as the agent reads it and the audit records it. */
  reason: string;
}

const SCOPES = { key: 'member key', agent: 'agent', ip: 'client address' } as const;

export function createMcpQuota(limits: McpQuotaLimits, o: { now?: () => number } = {}) {
  const buckets = createTokenBuckets(o);
  const refusal = (family: keyof typeof SCOPES, retryAfterMs: number, rate: BucketRate, what: string): QuotaRefusal => {
    const retryAfterSeconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
    return {
      scope: SCOPES[family],
      retryAfterSeconds,
      reason: `Rate limited: more than ${rate.perSecond} ${what} a second (bursts of ${rate.burst}) for this ${SCOPES[family]}; retry after ${retryAfterSeconds} s`,
    };
  };
  return {
    limits,
    /** Counts `count` requests against the key's and the agent's buckets, or refuses (nothing counted). */
    takeCalls(keyId: string, agentId: string, count: number): QuotaRefusal | undefined {
      const refused = buckets.take([
        { family: 'key', id: keyId, rate: limits.perKey },
        { family: 'agent', id: agentId, rate: limits.perAgent },
      ], count);
      if (!refused) return undefined;
      const family = refused.bucket as 'key' | 'agent';
      return refusal(family, refused.retryAfterMs, family === 'key' ? limits.perKey : limits.perAgent, 'requests');
    },
    /** Refuses a client address that has used up its failed authentications (nothing counted). */
    authBlocked(ip: string): QuotaRefusal | undefined {
      if (!buckets.isEmpty('ip', ip, limits.authFailuresPerIp)) return undefined;
      return refusal('ip', 1000 / limits.authFailuresPerIp.perSecond, limits.authFailuresPerIp, 'failed authentications');
    },
    /** Counts one failed authentication of a client address. */
    authFailed(ip: string): void {
      buckets.take([{ family: 'ip', id: ip, rate: limits.authFailuresPerIp }]);
    },
  };
}

export type McpQuota = ReturnType<typeof createMcpQuota>;
