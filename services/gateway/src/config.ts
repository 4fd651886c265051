import { z } from 'zod';
import { allowedDestinationsSetting, baseConfigShape, connectors, ConfigError, parseConfig } from '@portcullis/core';

const durationMinutes = (fallback: number) => z.coerce.number().int().positive().default(fallback);

/** `scheme://host[:port]` of an http(s) URL with nothing after it; undefined for anything else. */
function originOf(text: string): string | undefined {
  try {
    const url = new URL(text);
    const bare = url.pathname === '/' && !url.search && !url.hash && !url.username && !url.password;
    return (url.protocol === 'http:' || url.protocol === 'https:') && bare && !text.endsWith('?') && !text.endsWith('#') ? url.origin : undefined;
  } catch {
    return undefined;
  }
}

/** A comma-separated list of origins, each normalised as browsers send it (`https://app.example.com`). */
const originList = z.string().default('').transform((value, ctx) => {
  const origins: string[] = [];
  for (const item of value.split(',').map((s) => s.trim()).filter(Boolean)) {
    const origin = originOf(item);
    if (!origin) {
      ctx.addIssue({ code: 'custom', message: `${JSON.stringify(item)} is not an origin: write scheme://host[:port] (http or https, no path), comma-separated` });
      return z.NEVER;
    }
    origins.push(origin);
  }
  return origins;
});

const gatewayShape = {
  ...baseConfigShape,
  PORT: z.coerce.number().int().min(0).max(65_535).default(8080),
  HOST: z.string().min(1).default('127.0.0.1'),
  /** The address people and agents use; links in e-mails and the banner are built from it. */
  PUBLIC_URL: z.string().url().optional(),
  /** Where the policy decision service answers gRPC. */
  POLICY_URL: z.string().min(1).default('127.0.0.1:50051'),
  /** Where the audit service answers gRPC. */
  AUDIT_URL: z.string().min(1).default('127.0.0.1:50052'),
  /** `smtp://…`, `file://<dir>` or `log` (refused in production). */
  MAIL_URL: z.string().regex(/^(smtps?:\/\/.+|file:\/\/.+|log)$/, 'must be smtp://…, file://<dir> or log').optional(),
  MAIL_FROM: z.string().default('Portcullis <no-reply@portcullis.local>'),
  /**
   * Browser origins besides PUBLIC_URL's that may call `/mcp` (comma-separated). A request with
   * any other `Origin` is refused with 403 (DNS rebinding protection, decision 024); loopback
   * origins are accepted too outside production.
   */
  MCP_ALLOWED_ORIGINS: originList,
  /** Largest `/mcp` request body, in bytes. */
  MCP_BODY_LIMIT_BYTES: z.coerce.number().int().positive().default(1_048_576),
  /** Largest `/api` request body, in bytes. */
  API_BODY_LIMIT_BYTES: z.coerce.number().int().positive().default(65_536),
  /** Deadline for one Authorize call to the policy service. */
  POLICY_TIMEOUT_MS: z.coerce.number().int().positive().default(2_000),
  /** Deadline for one upstream tool call. */
  UPSTREAM_TIMEOUT_MS: z.coerce.number().int().positive().default(30_000),
  /** Longest an allowed call waits for the bus to accept its write-ahead record; then it is refused. */
  AUDIT_RECORD_TIMEOUT_MS: z.coerce.number().int().positive().default(5_000),
  /** Upstream MCP sessions (one per member and connector) unused this long are closed. */
  UPSTREAM_IDLE_SECONDS: z.coerce.number().int().positive().default(300),
  /**
   * Calls in flight at once on one upstream session, i.e. per (member, connector) per gateway; more
   * wait their turn within the call's timeout. A bound on what one member can pile onto a
   * provider, not a throughput limit: an agent's parallel tool calls rarely exceed a few dozen.
   */
  UPSTREAM_MAX_CONCURRENCY: z.coerce.number().int().positive().default(64),
  /** Upstream sessions kept open per gateway; the least recently used is closed to make room. */
  UPSTREAM_MAX_SESSIONS: z.coerce.number().int().positive().default(1_000),
  /** Where the OAuth callback sends the browser back to (the dashboard); PUBLIC_URL when unset. */
  DASHBOARD_URL: z.string().url().optional(),
  SESSION_IDLE_MINUTES: durationMinutes(60 * 12),
  /** A tool (MCP) session unused this long is expired: its next request is 404 and the client re-initializes. */
  TOOL_SESSION_IDLE_MINUTES: durationMinutes(60),
  SESSION_MAX_MINUTES: durationMinutes(60 * 24 * 14),
  /**
   * Who must enrol in TOTP MFA before using the dashboard API: nobody (`off`), users who own
   * an agent (`owners`), or everyone (`all`). Users who enabled MFA must pass it regardless.
   */
  MFA_REQUIRED: z.enum(['off', 'owners', 'all']).default('off'),
  /**
   * Rate limits (in-memory per replica; fixed windows of RATE_LIMIT_WINDOW_MINUTES). Sign-in
   * code requests per e-mail address and per client IP; code and link exchanges per IP; MFA
   * code checks (verify, verify-setup) per IP.
   */
  RATE_LIMIT_WINDOW_MINUTES: durationMinutes(15),
  RATE_LIMIT_MAGIC_LINK_PER_ADDRESS: z.coerce.number().int().positive().default(5),
  RATE_LIMIT_MAGIC_LINK_PER_IP: z.coerce.number().int().positive().default(20),
  RATE_LIMIT_VERIFY_PER_IP: z.coerce.number().int().positive().default(30),
  RATE_LIMIT_MFA_PER_IP: z.coerce.number().int().positive().default(30),
  /**
   * Abuse limits per rolling hour, counted in Postgres so every replica shares them (decision
   * 026): invites sent per inviting user and per client IP (across agents), agents created per user.
   */
  RATE_LIMIT_INVITES_PER_USER: z.coerce.number().int().positive().default(20),
  RATE_LIMIT_INVITES_PER_IP: z.coerce.number().int().positive().default(50),
  RATE_LIMIT_AGENTS_PER_USER: z.coerce.number().int().positive().default(10),
  /**
   * Member key generations and rotations per rolling hour (each re-wraps the member's vault),
   * per user across agents and per member, shared in Postgres (decision 068).
   */
  RATE_LIMIT_KEY_ROTATIONS_PER_USER: z.coerce.number().int().positive().default(30),
  RATE_LIMIT_KEY_ROTATIONS_PER_MEMBER: z.coerce.number().int().positive().default(10),
  /**
   * Portcullis's own authorization server (decision 050): client registrations per client IP
   * per rolling hour (shared in Postgres), and token/revocation requests per client IP per
   * RATE_LIMIT_WINDOW_MINUTES (in-memory per replica).
   */
  RATE_LIMIT_OAUTH_REGISTER_PER_IP: z.coerce.number().int().positive().default(20),
  RATE_LIMIT_OAUTH_TOKEN_PER_IP: z.coerce.number().int().positive().default(300),
  /**
   * Audit sinks' "Send test" per rolling hour, per user (across agents) and per agent, counted in
   * Postgres so every replica shares them (decision 058).
   */
  RATE_LIMIT_SINK_TESTS_PER_USER: z.coerce.number().int().positive().default(60),
  RATE_LIMIT_SINK_TESTS_PER_AGENT: z.coerce.number().int().positive().default(20),
  /**
   * Internal destinations audit sinks may reach (decision 058): host names, addresses and CIDR
   * ranges, comma-separated (`otel-collector.internal,10.20.0.0/16`). Everything else must be a
   * public address (and https). The gateway checks sinks with it; the audit service delivers with it.
   */
  SINK_ALLOWED_HOSTS: allowedDestinationsSetting,
  /**
   * Live audit stream (GET /api/audit/stream): the heartbeat interval, which is also how often
   * each stream's visible agents and session are re-checked; open streams per user on one
   * replica; frames a slow client may have waiting before it is disconnected.
   */
  AUDIT_STREAM_HEARTBEAT_MS: z.coerce.number().int().min(100).max(300_000).default(15_000),
  AUDIT_STREAM_MAX_PER_USER: z.coerce.number().int().positive().default(5),
  AUDIT_STREAM_QUEUE_LIMIT: z.coerce.number().int().positive().default(1_000),
  /**
   * Call approvals (decision 063): how long a pending request stays open, how long an approval
   * is usable from the moment it is given, and how often each replica marks expired requests.
   */
  APPROVAL_PENDING_TTL_SECONDS: z.coerce.number().int().positive().max(30 * 86_400).default(3_600),
  APPROVAL_GRANT_TTL_SECONDS: z.coerce.number().int().positive().max(30 * 86_400).default(900),
  APPROVAL_SWEEP_INTERVAL_MS: z.coerce.number().int().min(100).max(3_600_000).default(30_000),
  /**
   * Most open (pending) approval requests one member of an agent, and one agent, may have at
   * once (decision 067); a call that would open one more is denied, audited, and not held.
   */
  APPROVAL_MAX_PENDING_PER_MEMBER: z.coerce.number().int().positive().max(10_000).default(20),
  APPROVAL_MAX_PENDING_PER_AGENT: z.coerce.number().int().positive().max(10_000).default(100),
  /**
   * Tenant quotas (decision 069), in each replica's memory. `/mcp` requests per member key and
   * per agent: a token bucket refilled at the rate a second, holding the burst at most (a batch
   * counts each of its requests); over it, HTTP 429 with Retry-After and a JSON-RPC error,
   * audited as a DENY. Failed authentications (an unknown, revoked or expired key or token) per
   * client IP a minute, after which that address is refused before any key is looked up. A
   * refusal is answered after MCP_RATE_PENALTY_MS.
   */
  MCP_RATE_PER_KEY: z.coerce.number().positive().default(50),
  MCP_RATE_BURST_PER_KEY: z.coerce.number().int().positive().default(100),
  MCP_RATE_PER_AGENT: z.coerce.number().positive().default(200),
  MCP_RATE_BURST_PER_AGENT: z.coerce.number().int().positive().default(400),
  MCP_AUTH_FAILURES_PER_IP_PER_MINUTE: z.coerce.number().int().positive().default(30),
  MCP_RATE_PENALTY_MS: z.coerce.number().int().min(0).max(10_000).default(1_000),
  /**
   * Turns for heavy API work (decision 069), per replica: audit reads (pages, histograms, member
   * lists, dashboard counters and overviews, shadow results), exports (while they stream) and
   * simulations, each at most _AT_ONCE across users, _PER_USER per user and _PER_AGENT over one
   * agent; the rest wait in a queue per user (at most WORK_QUEUE_PER_USER, for at most
   * WORK_MAX_WAIT_MS) and freed turns go to users in turn; beyond, 429 with Retry-After.
   */
  AUDIT_READS_AT_ONCE: z.coerce.number().int().positive().default(4),
  AUDIT_READS_PER_USER: z.coerce.number().int().positive().default(2),
  AUDIT_READS_PER_AGENT: z.coerce.number().int().positive().default(4),
  EXPORTS_AT_ONCE: z.coerce.number().int().positive().default(2),
  EXPORTS_PER_USER: z.coerce.number().int().positive().default(1),
  EXPORTS_PER_AGENT: z.coerce.number().int().positive().default(1),
  SIMULATIONS_AT_ONCE: z.coerce.number().int().positive().default(1),
  SIMULATIONS_PER_USER: z.coerce.number().int().positive().default(1),
  SIMULATIONS_PER_AGENT: z.coerce.number().int().positive().default(1),
  WORK_QUEUE_PER_USER: z.coerce.number().int().positive().default(8),
  WORK_MAX_WAIT_MS: z.coerce.number().int().positive().max(120_000).default(10_000),
  /**
   * `GET /metrics` answers only `Authorization: Bearer <METRICS_TOKEN>` when set; unset, it is
   * not served in production and is anonymous elsewhere (decision 068).
   */
  METRICS_TOKEN: z.string().min(32, 'must be at least 32 characters').optional(),
  /** Honour X-Forwarded-For from a load balancer in front. */
  TRUST_PROXY: z.enum(['true', 'false']).default('false').transform((v) => v === 'true'),
  ...Object.fromEntries(connectors.map((c) => [`UPSTREAM_${c.key.toUpperCase()}_URL`, z.string().url().optional()])),
  /** An operator's platform OAuth app for a managed connector, used instead of dynamic registration. */
  ...Object.fromEntries(connectors.filter((c) => c.oauth === 'managed').flatMap((c) => [
    [`OAUTH_${c.key.toUpperCase()}_CLIENT_ID`, z.string().min(1).optional()],
    [`OAUTH_${c.key.toUpperCase()}_CLIENT_SECRET`, z.string().min(1).optional()],
  ])),
};

/** Every environment variable the gateway service reads (deploy files are checked against it). */
export const GATEWAY_CONFIG_VARIABLES: readonly string[] = Object.keys(gatewayShape);

export type GatewayConfig = z.infer<z.ZodObject<typeof gatewayShape>> & {
  /** Per-connector upstream MCP URL: the catalog's, unless configured otherwise. */
  upstreamUrls: Record<string, string>;
  /** Operator-configured OAuth apps of managed connectors, by connector key. */
  platformApps: Record<string, { clientId: string; clientSecret?: string }>;
  secret: string;
};

/** Reads the gateway's configuration and applies the startup guard. */
export function loadGatewayConfig(env: NodeJS.ProcessEnv, secret: string): GatewayConfig {
  const parsed = parseConfig(gatewayShape, env);
  const problems: string[] = [];
  const mailUrl = parsed.MAIL_URL ?? (parsed.NODE_ENV === 'production' ? undefined : 'log');
  if (parsed.NODE_ENV === 'production') {
    if (!mailUrl) problems.push('  MAIL_URL: required when NODE_ENV=production');
    if (mailUrl === 'log') problems.push('  MAIL_URL: "log" would print sign-in codes; refused when NODE_ENV=production');
    if (!parsed.PUBLIC_URL) problems.push('  PUBLIC_URL: required when NODE_ENV=production');
  }
  if (problems.length > 0) throw new ConfigError(`Invalid configuration:\n${problems.join('\n')}`);
  const record = parsed as Record<string, unknown>;
  const upstreamUrls = Object.fromEntries(
    connectors.map((c) => [c.key, (record[`UPSTREAM_${c.key.toUpperCase()}_URL`] as string | undefined) ?? c.remoteUrl]),
  );
  const platformApps: GatewayConfig['platformApps'] = {};
  for (const c of connectors) {
    const clientId = record[`OAUTH_${c.key.toUpperCase()}_CLIENT_ID`] as string | undefined;
    const clientSecret = record[`OAUTH_${c.key.toUpperCase()}_CLIENT_SECRET`] as string | undefined;
    if (clientId) platformApps[c.key] = { clientId, ...(clientSecret ? { clientSecret } : {}) };
  }
  return { ...parsed, MAIL_URL: mailUrl, upstreamUrls, platformApps, secret } as GatewayConfig;
}
