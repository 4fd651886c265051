import { ConfigError, resolveSecret } from '@portcullis/core';
import { loadSandboxConfig } from './config.ts';
import { startSandbox } from './sandbox.ts';

/**
 * Runs the sandbox on its own. It refuses production: its tokens come from an open
 * endpoint and its data is fake, so it must never stand in for real services there.
 */
async function main(): Promise<void> {
  const config = loadSandboxConfig();
  if (config.NODE_ENV === 'production') {
    console.error('sandbox: refusing to start with NODE_ENV=production; the sandbox hands out tokens to anyone and serves fake data, so it exists only for development, tests and benchmarks');
    process.exit(1);
  }
  const sandbox = await startSandbox({
    host: config.SANDBOX_HOST,
    port: config.SANDBOX_PORT,
    secret: resolveSecret(config),
    accessTokenTtlSeconds: config.SANDBOX_ACCESS_TOKEN_TTL_SECONDS,
  });
  console.log(`sandbox listening on ${sandbox.url}`);

  const stop = (): void => {
    sandbox.close().then(
      () => process.exit(0),
      (error: unknown) => {
        console.error('sandbox: shutdown failed', error);
        process.exit(1);
      },
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((error: unknown) => {
  console.error(error instanceof ConfigError ? error.message : error);
  process.exit(1);
});
