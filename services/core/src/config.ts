import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
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

/** Permission bits for group and others: a file holding a secret must have none of them. */
const SHARED_BITS = 0o077;
/** POSIX modes mean nothing on Windows; there the checks below are skipped. */
const POSIX = process.platform !== 'win32';

function modeOf(file: string): number | undefined {
  try { return statSync(file).mode & 0o777; } catch { return undefined; }
}

/**
 * Writes a file only its owner can read or write (0600), the generated secret's and the demo
 * key's mode. Creation gets the mode directly; an existing file of a looser mode is tightened.
 */
export function writePrivateFile(file: string, content: string): void {
  // Tightened before the new content is written, so the secret never sits in a readable file.
  if (POSIX && ((modeOf(file) ?? 0) & SHARED_BITS) !== 0) chmodSync(file, 0o600);
  writeFileSync(file, content, { mode: 0o600 });
}

/**
 * Reads a file that holds a secret, first tightening it to 0600 when group or others may read
 * it (files copied, restored from a backup, or written by an older version keep their mode).
 * Undefined when there is no such file.
 */
export function readPrivateFile(file: string): string | undefined {
  const mode = modeOf(file);
  if (mode === undefined) return undefined;
  if (POSIX && (mode & SHARED_BITS) !== 0) chmodSync(file, 0o600);
  return readFileSync(file, 'utf8').trim();
}

/**
 * The server secret. In production it must be configured (`PORTCULLIS_SECRET`); elsewhere one
 * is generated on first start and kept in `DATA_DIR/secret` (mode 0600, in a directory created
 * 0700) so later starts (and sealed data) keep working. An existing secret file that group or
 * others may read is tightened to 0600 outside production; in production such a file — never
 * read there, but a server secret all the same — stops the start until it is removed or
 * made private, so a leaked development secret cannot go unnoticed (decision 027).
 */
export function resolveSecret(config: { NODE_ENV: string; DATA_DIR: string; PORTCULLIS_SECRET?: string | undefined }): string {
  const file = join(config.DATA_DIR, 'secret');
  if (config.NODE_ENV === 'production') {
    const mode = modeOf(file);
    const problems: string[] = [];
    if (POSIX && mode !== undefined && (mode & SHARED_BITS) !== 0) {
      problems.push(`  ${file}: a server secret file readable by group or others (mode ${mode.toString(8).padStart(4, '0')}); production takes its secret from PORTCULLIS_SECRET only — delete this file, or make it private (chmod 600 ${file})`);
    }
    if (!config.PORTCULLIS_SECRET) problems.push('  PORTCULLIS_SECRET: required when NODE_ENV=production');
    if (problems.length > 0) throw new ConfigError(`Invalid configuration:\n${problems.join('\n')}`);
    return config.PORTCULLIS_SECRET!;
  }
  if (config.PORTCULLIS_SECRET) return config.PORTCULLIS_SECRET;
  mkdirSync(config.DATA_DIR, { recursive: true, mode: 0o700 });
  const existing = readPrivateFile(file);
  if (existing) return existing;
  const secret = randomBytes(32).toString('base64url');
  writePrivateFile(file, secret + '\n');
  return secret;
}
