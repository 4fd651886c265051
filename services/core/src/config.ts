import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';

/** Raised at boot when the environment does not satisfy a service's config schema. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

/** Variables every service shares. Each service extends this with its own. */
export const baseConfigShape = {
  NODE_ENV: z.enum(['development', 'test', 'production']).default('development'),
  DATA_DIR: z.string().min(1).default('./data'),
  DATABASE_URL: z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL').optional(),
  NATS_URL: z.string().min(1).optional(),
  /** Prefix for every NATS subject and stream; lets several deployments (or tests) share a server. */
  /** JetStream replicas of the streams and buckets Portcullis creates: 3 on a 3-node cluster (R3). */
  NATS_REPLICAS: z.coerce.number().int().min(1).max(5).default(1),
  NATS_SUBJECT_PREFIX: z.string().regex(/^([A-Za-z0-9_-]+\.)?$/, 'letters, digits, _ or - followed by a dot').optional(),
  PORTCULLIS_SECRET: z.string().min(32, 'must be at least 32 characters').optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** OpenTelemetry: send traces (OTLP over HTTP) to this collector, e.g. http://otel-collector:4318. Unset: tracing off. */
  OTEL_EXPORTER_OTLP_ENDPOINT: z.string().url().optional(),
  /** Policy and audit services: serve Prometheus `GET /metrics` on this `host:port` (the gateway serves it on its own port). Unset: off. */
  METRICS_ADDRESS: z.string().regex(/^[^\s:]+:\d{1,5}$/, 'must be host:port').optional(),
};

/**
 * Parses `env` with `schema` and fails fast with one line per offending variable,
 * each naming the variable, so a misconfigured deployment says exactly what to fix.
 */
export function parseConfig<S extends z.ZodRawShape>(shape: S, env: NodeJS.ProcessEnv = process.env): z.infer<z.ZodObject<S>> {
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const result = z.object(shape).safeParse(cleaned);
  if (!result.success) {
    const lines = result.error.issues.map((issue) => `  ${issue.path.join('.') || '(env)'}: ${issue.message}`);
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  return result.data;
}

/**
 * The server secret. In production it must be configured; elsewhere one is generated on
 * first start and kept under DATA_DIR so later starts (and sealed data) keep working.
 */
export function resolveSecret(config: { NODE_ENV: string; DATA_DIR: string; PORTCULLIS_SECRET?: string | undefined }): string {
  if (config.PORTCULLIS_SECRET) return config.PORTCULLIS_SECRET;
  if (config.NODE_ENV === 'production') {
    throw new ConfigError('Invalid configuration:\n  PORTCULLIS_SECRET: required when NODE_ENV=production');
  }
  mkdirSync(config.DATA_DIR, { recursive: true });
  const file = join(config.DATA_DIR, 'secret');
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  const secret = randomBytes(32).toString('base64url');
  writeFileSync(file, secret + '\n', { mode: 0o600 });
  return secret;
}
