import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { collectDefaultMetrics, Registry, type Metric } from 'prom-client';

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

/** Label values of one series, by label name. */
export type LabelValues<L extends string> = Partial<Record<L, string | number>>;

/**
 * A series per label set, kept in a `Map` by the values' joined key. prom-client hashes and
 * validates the label object on every update (~4 % of the gateway's CPU at saturation, eleven
 * updates a call); here an update is one map lookup and a few additions. The registry still
 * formats the text: each metric answers `get()` in prom-client's own shape.
 */
abstract class LeanMetric<L extends string, S> {
  protected readonly series = new Map<string, { labels: LabelValues<L>; data: S }>();
  constructor(readonly name: string, readonly help: string, protected readonly labelNames: readonly L[]) {}

  protected seriesOf(labels: LabelValues<L> | undefined): S {
    let key = '';
    if (labels) for (const name of this.labelNames) key += `${labels[name] ?? ''}\u0000`;
    let found = this.series.get(key);
    if (!found) {
      for (const name of Object.keys(labels ?? {})) {
        if (!this.labelNames.includes(name as L)) throw new Error(`metric ${this.name} has no label ${name}`);
      }
      found = { labels: { ...labels }, data: this.empty() };
      this.series.set(key, found);
    }
    return found.data;
  }

  protected abstract empty(): S;

  /** Forgets every series; a metric without labels starts at zero, as prom-client's does. */
  reset(): void {
    this.series.clear();
    if (this.labelNames.length === 0) this.seriesOf(undefined);
  }
}

export class LeanCounter<L extends string> extends LeanMetric<L, { value: number }> {
  readonly type = 'counter';
  readonly aggregator = 'sum';
  protected empty() { return { value: 0 }; }

  inc(labels?: LabelValues<L> | number, by = 1): void {
    if (typeof labels === 'number') { by = labels; labels = undefined; }
    if (!(by >= 0)) throw new Error(`counter ${this.name} increased by ${by}`);
    this.seriesOf(labels).value += by;
  }

  get() {
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator,
      values: [...this.series.values()].map(({ labels, data }) => ({ labels, value: data.value })) };
  }
}

export class LeanHistogram<L extends string> extends LeanMetric<L, { buckets: Float64Array; sum: number; count: number }> {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  constructor(name: string, help: string, labelNames: readonly L[], private readonly bounds: readonly number[]) {
    super(name, help, labelNames);
  }
  protected empty() { return { buckets: new Float64Array(this.bounds.length), sum: 0, count: 0 }; }

  observe(labels: LabelValues<L> | number, value?: number): void {
    const [series, v] = typeof labels === 'number' ? [undefined, labels] : [labels, value!];
    if (!Number.isFinite(v)) throw new TypeError(`histogram ${this.name} observed ${v}`);
    const data = this.seriesOf(series);
    const i = this.bounds.findIndex((bound) => v <= bound);
    if (i >= 0) data.buckets[i]! += 1;
    data.sum += v;
    data.count += 1;
  }

  /** Starts a timer; the function it returns observes the seconds since and returns them. */
  startTimer(labels?: LabelValues<L>): () => number {
    const started = performance.now();
    return () => {
      const seconds = (performance.now() - started) / 1000;
      this.observe(labels ?? {}, seconds);
      return seconds;
    };
  }

  /** prom-client's text shape: the series' labels as `sharedLabels`, `le` first. */
  getForPromString() {
    const values: { labels: Record<string, string | number>; sharedLabels: LabelValues<L>; value: number; metricName: string }[] = [];
    for (const { labels, data } of this.series.values()) {
      let cumulative = 0;
      this.bounds.forEach((le, i) => {
        cumulative += data.buckets[i]!;
        values.push({ labels: { le }, sharedLabels: labels, value: cumulative, metricName: `${this.name}_bucket` });
      });
      values.push({ labels: { le: '+Inf' }, sharedLabels: labels, value: data.count, metricName: `${this.name}_bucket` });
      values.push({ labels: {}, sharedLabels: labels, value: data.sum, metricName: `${this.name}_sum` });
      values.push({ labels: {}, sharedLabels: labels, value: data.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  get() {
    const shaped = this.getForPromString();
    return { ...shaped, values: shaped.values.map(({ labels, sharedLabels, ...rest }) => ({ ...rest, labels: { ...labels, ...sharedLabels } })) };
  }
}

/** The counter `name`, created on first use (services may start more than once in one process). */
export function counter<L extends string>(name: string, help: string, labelNames: readonly L[] = []): LeanCounter<L> {
  return registered(name, () => new LeanCounter(name, help, labelNames));
}

/** The histogram `name`, created on first use. */
export function histogram<L extends string>(name: string, help: string, labelNames: readonly L[] = [], buckets = LATENCY_BUCKETS): LeanHistogram<L> {
  return registered(name, () => new LeanHistogram(name, help, labelNames, [...buckets].sort((a, b) => a - b)));
}

function registered<M extends LeanMetric<string, unknown>>(name: string, create: () => M): M {
  const existing = metricsRegistry.getSingleMetric(name) as unknown as M | undefined;
  if (existing) return existing;
  const metric = create();
  metric.reset();
  metricsRegistry.registerMetric(metric as unknown as Metric);
  return metric;
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
