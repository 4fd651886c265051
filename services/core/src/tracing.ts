import { context, propagation, trace, type Context, type Tracer } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor, SimpleSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';

/**
 * OpenTelemetry traces across gateway → policy → audit, off by default. With an exporter
 * (`OTEL_EXPORTER_OTLP_ENDPOINT`, or one a test passes) a tool call is one trace: the
 * gateway's `tools/call` span, the decision point's `Authorize` (context carried in gRPC
 * metadata) and the audit writer's `audit.write` (context carried in the audit entry through
 * the bus). Without one the API's no-op tracer is used and nothing is carried.
 */
let provider: BasicTracerProvider | undefined;

export interface TracingOptions {
  /** Where spans go; else OTLP over HTTP to `OTEL_EXPORTER_OTLP_ENDPOINT`; else tracing stays off. */
  exporter?: SpanExporter;
  endpoint?: string | undefined;
  /** `service.name` of the process (`portcullis` in single-process mode). */
  serviceName: string;
}

/** Turns tracing on for this process (once; later calls are ignored). Returns whether it is on. */
export function initTracing(options: TracingOptions): boolean {
  if (provider) return true;
  const exporter = options.exporter ?? (options.endpoint ? new OTLPTraceExporter({ url: `${options.endpoint.replace(/\/$/, '')}/v1/traces` }) : undefined);
  if (!exporter) return false;
  provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': options.serviceName }),
    // A test's exporter gets each span as it ends; a collector gets batches.
    spanProcessors: [options.exporter ? new SimpleSpanProcessor(exporter) : new BatchSpanProcessor(exporter)],
  });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  return true;
}

/** Whether this process records spans: without a provider every span is a no-op, and hot paths skip making one. */
export function tracingEnabled(): boolean {
  return provider !== undefined;
}

/** Flushes and stops tracing (shutdown, tests). */
export async function shutdownTracing(): Promise<void> {
  await provider?.shutdown();
  provider = undefined;
  trace.disable();
  propagation.disable();
  context.disable();
}

/** The tracer of one Portcullis service: spans name their service by the tracer (`portcullis-gateway`, …). */
export function tracerOf(service: 'gateway' | 'policy' | 'audit'): Tracer {
  return trace.getTracer(`portcullis-${service}`);
}

/** The active trace context as W3C headers (`traceparent`, `tracestate`); empty when tracing is off. */
export function currentTraceHeaders(): Record<string, string> {
  // Off: there is no context to carry, and asking the no-op propagator costs every call.
  if (!provider) return {};
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier;
}

/** The context the headers describe (a parent for the next span). */
export function contextFromTraceHeaders(headers: Record<string, string | undefined>): Context {
  return propagation.extract(context.active(), headers);
}
