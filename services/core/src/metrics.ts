import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { collectDefaultMetrics, Counter, Histogram, Registry } from 'prom-client';

/**
 * Prometheus metrics. One registry per process: in single-process mode the gateway's
 * `/metrics` shows every service's series; in split mode the policy and audit services serve
 * theirs on `METRICS_ADDRESS`. Labels are low-cardinality only (service, decision): never a
 * member, key or agent id.
 */
export const metricsRegistry = new Registry();
collectDefaultMetrics({ register: metricsRegistry, prefix: 'portcullis_process_' });

/** Latency buckets in seconds, from 0.1 ms to 10 s. */
export const LATENCY_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** The counter `name`, created on first use (services may start more than once in one process). */
export function counter<L extends string>(name: string, help: string, labelNames: readonly L[] = []): Counter<L> {
  return (metricsRegistry.getSingleMetric(name) as Counter<L> | undefined) ?? new Counter({ name, help, labelNames, registers: [metricsRegistry] });
}

/** The histogram `name`, created on first use. */
export function histogram<L extends string>(name: string, help: string, labelNames: readonly L[] = [], buckets = LATENCY_BUCKETS): Histogram<L> {
  return (metricsRegistry.getSingleMetric(name) as Histogram<L> | undefined) ?? new Histogram({ name, help, labelNames, buckets, registers: [metricsRegistry] });
}

/** Serves `GET /metrics` on `address` (`host:port`, port 0 picks one) for a service without an HTTP port of its own. */
export async function startMetricsServer(address: string): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    if (req.method !== 'GET' || req.url?.split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('Not found');
      return;
    }
    void metricsRegistry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': metricsRegistry.contentType }).end(text),
      () => res.writeHead(500, { 'content-type': 'text/plain' }).end('metrics unavailable'),
    );
  });
  const host = address.slice(0, address.lastIndexOf(':'));
  const port = Number(address.slice(address.lastIndexOf(':') + 1));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  const bound = server.address() as AddressInfo;
  return {
    url: `http://${host}:${bound.port}/metrics`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
