import { baseConfigShape, parseConfig } from '@portcullis/core';
import { z } from 'zod';

/** Environment of the standalone sandbox (`npm run start:sandbox`). */
export const sandboxConfigShape = {
  ...baseConfigShape,
  SANDBOX_PORT: z.coerce.number().int().min(0).max(65535).default(9400),
  SANDBOX_HOST: z.string().min(1).default('127.0.0.1'),
};

export type SandboxConfig = ReturnType<typeof loadSandboxConfig>;

/** Parses the sandbox's environment; throws `ConfigError` naming each bad variable. */
export function loadSandboxConfig(env: NodeJS.ProcessEnv = process.env) {
  return parseConfig(sandboxConfigShape, env);
}
