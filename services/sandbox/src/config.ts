import { baseConfigShape, parseConfig } from '@portcullis/core';
import { z } from 'zod';

/** Environment of the standalone sandbox (`npm run start:sandbox`). */
export const sandboxConfigShape = {
  ...baseConfigShape,
  SANDBOX_PORT: z.coerce.number().int().min(0).max(65535).default(9400),
  SANDBOX_HOST: z.string().min(1).default('127.0.0.1'),
  /** Lifetime of the access tokens the sandbox's OAuth servers issue (refresh tokens: 30 days). */
  SANDBOX_ACCESS_TOKEN_TTL_SECONDS: z.coerce.number().int().min(1).max(30 * 24 * 60 * 60).default(3600),
};

export type SandboxConfig = ReturnType<typeof loadSandboxConfig>;

/** Parses the sandbox's environment; throws `ConfigError` naming each bad variable. */
export function loadSandboxConfig(env: NodeJS.ProcessEnv = process.env) {
  return parseConfig(sandboxConfigShape, env);
}
