import { ConfigError, initTracing } from '@portcullis/core';
import { startStandalone } from './standalone.ts';

async function main() {
  initTracing({ serviceName: 'portcullis', endpoint: process.env.OTEL_EXPORTER_OTLP_ENDPOINT });
  const product = await startStandalone(process.env);
  process.stdout.write(product.banner + '\n');

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    process.stdout.write(`${signal}: stopping; writing pending audit entries…\n`);
    await product.close();
    process.stdout.write('stopped\n');
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof ConfigError ? err.message : (err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
