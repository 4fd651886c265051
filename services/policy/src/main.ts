import { ConfigError, initTracing, startMetricsServer, openBus, openDatabase } from '@portcullis/core';
import { loadPolicyConfig, requireSplitModeConfig } from './config.ts';
import { startPolicyService } from './policy-service.ts';

/** Split mode: the policy decision point as a process of its own (`npm run start:policy`). */
async function main(): Promise<void> {
  const config = requireSplitModeConfig(loadPolicyConfig(process.env));
  initTracing({ serviceName: 'portcullis-policy', endpoint: config.OTEL_EXPORTER_OTLP_ENDPOINT });
  const database = await openDatabase(config);
  const bus = await openBus(config, 'policy');
  const service = await startPolicyService(config, { db: database.db, bus });
  console.log(`policy listening on ${service.address}`);
  const metrics = config.METRICS_ADDRESS ? await startMetricsServer(config.METRICS_ADDRESS) : undefined;
  if (metrics) console.log(`policy metrics on ${metrics.url}`);

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`policy: ${signal} received, stopping`);
    try {
      await service.close();
      await metrics?.close();
      await bus.close();
      await database.close();
      process.exit(0);
    } catch (err) {
      console.error('policy: shutdown failed', err);
      process.exit(1);
    }
  };
  process.once('SIGINT', () => void stop('SIGINT'));
  process.once('SIGTERM', () => void stop('SIGTERM'));
}

main().catch((err: unknown) => {
  console.error(err instanceof ConfigError ? err.message : err);
  process.exit(1);
});
