import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { counter, histogram, metricsRegistry } from './metrics.ts';

/** The same observations through prom-client's own metrics, in a registry of their own. */
function reference() {
  const registry = new Registry();
  return {
    registry,
    histogram: new Histogram({ name: 'test_lean_seconds', help: 'A histogram', labelNames: ['stage'], buckets: [0.001, 0.01, 0.1], registers: [registry] }),
    counter: new Counter({ name: 'test_lean_total', help: 'A counter', labelNames: ['service', 'decision'], registers: [registry] }),
  };
}

const textOf = (registry: Registry, name: string) => registry.getSingleMetricAsString(name);

describe('metrics', () => {
  it('writes the same Prometheus text as prom-client for the same observations', async () => {
    const lean = { histogram: histogram('test_lean_seconds', 'A histogram', ['stage'], [0.001, 0.01, 0.1]), counter: counter('test_lean_total', 'A counter', ['service', 'decision']) };
    const ref = reference();
    for (const [stage, value] of [['key', 0.0004], ['key', 0.02], ['parse', 0.5], ['key', 0.001]] as const) {
      lean.histogram.observe({ stage }, value);
      ref.histogram.observe({ stage }, value);
    }
    const stop = lean.histogram.startTimer({ stage: 'timer' });
    const seconds = stop();
    ref.histogram.observe({ stage: 'timer' }, seconds);
    lean.counter.inc({ service: 'github', decision: 'ALLOW' });
    lean.counter.inc({ service: 'github', decision: 'ALLOW' }, 2);
    lean.counter.inc({ service: '', decision: 'DENY' });
    ref.counter.inc({ service: 'github', decision: 'ALLOW' });
    ref.counter.inc({ service: 'github', decision: 'ALLOW' }, 2);
    ref.counter.inc({ service: '', decision: 'DENY' });

    expect(await textOf(metricsRegistry, 'test_lean_seconds')).toBe(await textOf(ref.registry, 'test_lean_seconds'));
    expect(await textOf(metricsRegistry, 'test_lean_total')).toBe(await textOf(ref.registry, 'test_lean_total'));
    expect(await metricsRegistry.metrics()).toContain('test_lean_seconds_bucket{le="0.01",stage="key"} 2');
    expect((await metricsRegistry.getMetricsAsJSON()).find((m) => m.name === 'test_lean_total')?.values)
      .toEqual((await ref.registry.getMetricsAsJSON()).find((m) => m.name === 'test_lean_total')?.values);
  });

  it('returns the metric already registered under a name, and refuses labels it does not have', () => {
    const first = counter('test_lean_once_total', 'Once', ['decision']);
    expect(counter('test_lean_once_total', 'Once', ['decision'])).toBe(first);
    expect(() => first.inc({ other: 'x' } as never)).toThrow(/no label other/);
    expect(() => first.inc(-1)).toThrow();
    expect(() => histogram('test_lean_unlabelled_seconds', 'H').observe(Number.NaN)).toThrow();
  });
});

describe('metrics without labels', () => {
  it('show a zero series before the first update, as prom-client does', async () => {
    counter('test_lean_zero_total', 'Zero');
    histogram('test_lean_zero_seconds', 'Zero', [], [1]);
    const registry = new Registry();
    new Counter({ name: 'test_lean_zero_total', help: 'Zero', registers: [registry] });
    new Histogram({ name: 'test_lean_zero_seconds', help: 'Zero', buckets: [1], registers: [registry] });
    expect(await textOf(metricsRegistry, 'test_lean_zero_total')).toBe(await textOf(registry, 'test_lean_zero_total'));
    expect(await textOf(metricsRegistry, 'test_lean_zero_seconds')).toBe(await textOf(registry, 'test_lean_zero_seconds'));
  });
});
