import { ConfigError, initTracing, openBus, openDatabase, resolveSecret } from '@portcullis/core';
import { loadGatewayConfig } from './config.ts';
import { startGateway } from './gateway.ts';

/** Split mode: the gateway as its own process, against a shared Postgres and NATS. */
async function main() {
  const secret = resolveSecret({ NODE_ENV: process.env.NODE_ENV ?? 'development', DATA_DIR: process.env.DATA_DIR ?? './data', PORTCULLIS_SECRET: process.env.PORTCULLIS_SECRET });
  const config = loadGatewayConfig(process.env, secret);
  if (!config.DATABASE_URL) throw new ConfigError('Invalid configuration:\n  DATABASE_URL: required when the gateway runs as its own process');
  if (!config.NATS_URL) throw new ConfigError('Invalid configuration:\n  NATS_URL: required when the gateway runs as its own process');
  initTracing({ serviceName: 'portcullis-gateway', endpoint: config.OTEL_EXPORTER_OTLP_ENDPOINT });
  const database = await openDatabase(config);
  const bus = await openBus(config, 'gateway');
  const gateway = await startGateway(config, { db: database.db, bus, dbPing: database.ping });
  process.stdout.write(`gateway listening on ${gateway.url}\n`);

  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    await gateway.close();
    await bus.close();
    await database.close();
    process.exit(0);
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof ConfigError ? err.message : (err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
