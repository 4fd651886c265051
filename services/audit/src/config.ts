import { z } from 'zod';
import { allowedDestinationsSetting, baseConfigShape, parseConfig } from '@portcullis/core';

const auditShape = {
  ...baseConfigShape,
  /** Where the AuditQuery gRPC service listens (`host:port`; port 0 picks a free one). */
  GRPC_ADDRESS: z.string().min(1).default('127.0.0.1:50052'),
  /** A ClickHouse server's HTTP(S) URL. Unset: embedded chDB in `DATA_DIR/audit`. */
  CLICKHOUSE_URL: z.string().regex(/^https?:\/\/\S+$/, 'must be an http:// or https:// URL').optional(),
  /** Database that holds `audit_entries`; an identifier, since it is spliced into DDL as one. */
  CLICKHOUSE_DATABASE: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,62}$/, 'letters, digits and _ (not starting with a digit)').default('portcullis'),
  CLICKHOUSE_USER: z.string().min(1).optional(),
  CLICKHOUSE_PASSWORD: z.string().min(1).optional(),
  /** Most entries written in one INSERT (one part). */
  AUDIT_BATCH_SIZE: z.coerce.number().int().min(1).max(100_000).default(10_000),
  /** Longest a partial batch waits before it is written. */
  AUDIT_BATCH_MAX_WAIT_MS: z.coerce.number().int().min(0).max(60_000).default(500),
  /** Days an audit entry is kept (a table TTL). Unset: indefinitely, as the spec's default. */
  AUDIT_RETENTION_DAYS: z.coerce.number().int().min(1).max(36_500).optional(),
  /** Longest wait between two attempts to deliver to an audit sink that is down (decision 055). */
  AUDIT_SINK_RETRY_MAX_MS: z.coerce.number().int().min(100).max(3_600_000).default(60_000),
  /**
   * Internal destinations audit sinks may reach (decision 058): host names, addresses and CIDR
   * ranges, comma-separated. Give the gateway the same list: it checks sinks with it.
   */
  SINK_ALLOWED_HOSTS: allowedDestinationsSetting,
};

/** The audit service's configuration, parsed from the environment. */
/** Every environment variable the audit service reads (deploy files are checked against it). */
export const AUDIT_CONFIG_VARIABLES: readonly string[] = Object.keys(auditShape);

export type AuditConfig = z.infer<z.ZodObject<typeof auditShape>>;

/** Reads the audit service's configuration; throws `ConfigError` naming every bad variable. */
export function loadAuditConfig(env: NodeJS.ProcessEnv = process.env): AuditConfig {
  return parseConfig(auditShape, env);
}
