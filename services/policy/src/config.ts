import { z } from 'zod';
import { baseConfigShape, ConfigError, parseConfig } from '@portcullis/core';

const policyConfigShape = {
  ...baseConfigShape,
  /** Where the decision point answers gRPC: `host:port` (port 0 picks one) or `unix:/path`. */
  GRPC_ADDRESS: z.string().min(1).default('127.0.0.1:50051'),
  /** Where the audit service answers gRPC (`host:port` or `unix:/path`); Simulate reads past calls there. Unset: Simulate answers UNAVAILABLE. */
  AUDIT_URL: z.string().min(1).optional(),
  /**
   * Tests only: integer milliseconds added to every evaluation instant (time windows, the
   * context's clock), so end-to-end tests can land inside or outside a window without
   * waiting. Default 0; refused when NODE_ENV=production.
   */
  POLICY_CLOCK_OFFSET_MS: z.coerce.number().int().safe().default(0),
};

/** Every environment variable the policy service reads (deploy files are checked against it). */
export const POLICY_CONFIG_VARIABLES: readonly string[] = Object.keys(policyConfigShape);

export type PolicyConfig = z.infer<z.ZodObject<typeof policyConfigShape>>;

/** Reads the policy service's configuration; throws `ConfigError` naming each bad variable. */
export function loadPolicyConfig(env: NodeJS.ProcessEnv = process.env): PolicyConfig {
  const config = parseConfig(policyConfigShape, env);
  if (config.NODE_ENV === 'production' && config.POLICY_CLOCK_OFFSET_MS !== 0) {
    throw new ConfigError('Invalid configuration:\n  POLICY_CLOCK_OFFSET_MS: only for tests; must be unset (or 0) when NODE_ENV=production');
  }
  return config;
}

/**
 * Split mode (`npm run start:policy`) shares the database and the bus with the other
 * services, so neither may fall back to an embedded one: both URLs are required.
 */
export function requireSplitModeConfig(config: PolicyConfig): PolicyConfig & { DATABASE_URL: string; NATS_URL: string } {
  const missing = [
    !config.DATABASE_URL && '  DATABASE_URL: required when the policy service runs on its own (postgres://…)',
    !config.NATS_URL && '  NATS_URL: required when the policy service runs on its own (nats://…)',
  ].filter((line): line is string => typeof line === 'string');
  if (missing.length > 0) throw new ConfigError(`Invalid configuration:\n${missing.join('\n')}`);
  return config as PolicyConfig & { DATABASE_URL: string; NATS_URL: string };
}
