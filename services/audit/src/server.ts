import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { addHealthService, AuditQueryService, bindServer, channelOptions, type Bus, type Database } from '@portcullis/core';
import type { AuditConfig } from './config.ts';
import { startAuditWriter, type AuditWriter } from './consumer.ts';
import { createAuditQueryHandlers } from './handlers/audit-query-handlers.ts';
import type { AuditLogger } from './handlers/grpc-errors.ts';
import { startSinkWorkers, type SinkWorkers } from './sinks/sink-workers.ts';
import { openAuditStore, type AuditStore, type AuditStoreOptions } from './store/audit-store.ts';

/** How long `close()` lets running exports finish before cutting them off. */
const SHUTDOWN_GRACE_MS = 5_000;

/** A running audit service. */
export interface AuditService {
  /** The bound gRPC address (`host:port`), with the real port when 0 was configured. */
  address: string;
  store: AuditStore;
  /** Writes every entry already accepted by the bus, then stops gRPC and closes the store. */
  close(): Promise<void>;
}

/** The store location the configuration names: the server at `CLICKHOUSE_URL`, else chDB in `DATA_DIR/audit`. */
export function storeOptionsOf(config: AuditConfig): AuditStoreOptions {
  return {
    database: config.CLICKHOUSE_DATABASE,
    retentionDays: config.AUDIT_RETENTION_DAYS ?? null,
    target: config.CLICKHOUSE_URL
      ? { kind: 'server', url: config.CLICKHOUSE_URL, username: config.CLICKHOUSE_USER, password: config.CLICKHOUSE_PASSWORD }
      : { kind: 'chdb', path: join(config.DATA_DIR, 'audit') },
  };
}

/** A gRPC server carrying the AuditQuery service; not yet bound. */
export function createAuditGrpcServer(deps: { store: AuditStore; log: AuditLogger }): grpc.Server {
  const server = new grpc.Server(channelOptions);
  server.addService(AuditQueryService.service, createAuditQueryHandlers(deps));
  return server;
}

/**
 * Opens the store (applying migrations), starts the writer on the bus and serves
 * AuditQuery on `config.GRPC_ADDRESS`. Whatever started is stopped again if a later step fails.
 */
export async function startAuditService(config: AuditConfig, deps: { bus: Bus; log?: AuditLogger; sinks?: { db: Database; serverSecret: string } }): Promise<AuditService> {
  const log: AuditLogger = deps.log ?? ((message, error) => console.error(message, error ?? ''));
  const store = await openAuditStore(storeOptionsOf(config));
  const server = createAuditGrpcServer({ store, log });
  const health = addHealthService(server, 'portcullis.audit.v1.AuditQuery');
  let writer: AuditWriter | undefined;
  let sinks: SinkWorkers | undefined;
  try {
    // The audit sinks' workers (decision 055), where the service can read the sinks (Postgres) and open their secrets.
    sinks = deps.sinks ? await startSinkWorkers({
      ...deps.sinks, bus: deps.bus, log, retryMaxMs: config.AUDIT_SINK_RETRY_MAX_MS,
      destinations: { production: config.NODE_ENV === 'production', allowed: config.SINK_ALLOWED_HOSTS },
    }) : undefined;
    const running = await startAuditWriter({ bus: deps.bus, store, batchSize: config.AUDIT_BATCH_SIZE, maxWaitMs: config.AUDIT_BATCH_MAX_WAIT_MS, log, ...(sinks ? { sinks } : {}) });
    writer = running;
    const address = await bindServer(server, config.GRPC_ADDRESS);
    health.serving();
    let closing: Promise<void> | undefined;
    return {
      address,
      store,
      close: () => (closing ??= (async () => {
        health.notServing();
        await running.drain();
        await sinks?.stop();
        await shutdown(server);
        await store.close();
      })()),
    };
  } catch (err) {
    await writer?.stop().catch(() => undefined);
    await sinks?.stop().catch(() => undefined);
    server.forceShutdown();
    await store.close().catch(() => undefined);
    throw err;
  }
}

/** Lets in-flight calls finish, within a grace period. */
async function shutdown(server: grpc.Server): Promise<void> {
  await new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      server.forceShutdown();
      resolve();
    }, SHUTDOWN_GRACE_MS);
    server.tryShutdown(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}
