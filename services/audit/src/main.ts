import { ConfigError, initTracing, openBus, openDatabase, startMetricsServer, type DatabaseHandle } from '@portcullis/core';
import { loadAuditConfig } from './config.ts';
import { startAuditService } from './server.ts';

/**
 * Split-mode entry (`npm run start:audit`): the audit writer and query service on their
 * own, reading entries from NATS JetStream. Single-process mode starts the service from
 * `services/standalone` instead.
 */
async function main(): Promise<void> {
  const config = loadAuditConfig(process.env);
  if (!config.NATS_URL) {
    throw new ConfigError('Invalid configuration:\n  NATS_URL: required to run the audit service on its own (split mode); `npm start` runs everything in one process without it');
  }
  initTracing({ serviceName: 'portcullis-audit', endpoint: config.OTEL_EXPORTER_OTLP_ENDPOINT });
  const bus = await openBus(config, 'audit');
  // Audit sinks (decision 055) need the sinks' table and the secret that seals theirs.
  const database: DatabaseHandle | undefined = config.DATABASE_URL && config.PORTCULLIS_SECRET
    ? await openDatabase({ DATABASE_URL: config.DATABASE_URL, DATA_DIR: config.DATA_DIR })
    : undefined;
  if (!database) console.log('audit: sinks off (they need DATABASE_URL and PORTCULLIS_SECRET)');
  const sinks = database && config.PORTCULLIS_SECRET ? { db: database.db, serverSecret: config.PORTCULLIS_SECRET } : undefined;
  const service = await startAuditService(config, { bus, ...(sinks ? { sinks } : {}) }).catch(async (err: unknown) => {
    await bus.close().catch(() => undefined);
    await database?.close().catch(() => undefined);
    throw err;
  });
  console.log(`audit listening on ${service.address}`);
  const metrics = config.METRICS_ADDRESS ? await startMetricsServer(config.METRICS_ADDRESS) : undefined;
  if (metrics) console.log(`audit metrics on ${metrics.url}`);

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`audit: ${signal} received, writing pending entries and stopping`);
    service.close()
      .then(() => metrics?.close())
      .then(() => bus.close())
      .then(() => database?.close())
      .then(() => process.exit(0), (err: unknown) => {
        console.error('audit: shutdown failed', err);
        process.exit(1);
      });
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

main().catch((err: unknown) => {
  console.error(err instanceof ConfigError ? err.message : err);
  process.exit(1);
});
