import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { initTracing, shutdownTracing } from '@portcullis/core';
import { startStandalone, type Standalone } from '@portcullis/standalone';
import { connectMcp } from '../support/mcp-client.ts';
import { freePort } from '../support/processes.ts';

/**
 * One tool call is one trace across the three services: the gateway's `tools/call`, the
 * decision point's `Authorize` (its parent carried in gRPC metadata) and the audit writer's
 * `audit.write` spans (carried in the entry through the bus). In one process with an in-memory
 * exporter, so the test sees every service's spans; the services still talk over gRPC and the bus.
 */
describe('OpenTelemetry traces across gateway, policy and audit', () => {
  const exporter = new InMemorySpanExporter();
  const dataDir = mkdtempSync(join(tmpdir(), 'pc-trace-'));
  let product: Standalone;

  beforeAll(async () => {
    expect(initTracing({ serviceName: 'portcullis', exporter })).toBe(true);
    product = await startStandalone({ PORT: String(await freePort()), DATA_DIR: dataDir, MAIL_URL: `file://${join(dataDir, 'outbox')}`, LOG_LEVEL: 'silent', NODE_ENV: 'development', PORTCULLIS_DASHBOARD: 'off' });
  });
  afterAll(async () => {
    await product?.close();
    await shutdownTracing();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('an allowed call: tools/call → Authorize, and both audit records written, all in one trace', async () => {
    const { client, transport } = await connectMcp(product.gateway.url, product.demoMemberKey!);
    const result = await client.callTool({ name: 'github__get_me', arguments: {} });
    expect(result.isError).toBeFalsy();
    await transport.terminateSession().catch(() => undefined);
    await client.close();

    let spans: ReadableSpan[] = [];
    for (let i = 0; i < 50; i++) {
      spans = exporter.getFinishedSpans();
      if (spans.filter((s) => s.name === 'audit.write').length >= 2) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const call = spans.find((s) => s.name === 'tools/call' && s.attributes['mcp.tool'] === 'github__get_me')!;
    expect(call).toBeDefined();
    const traceId = call.spanContext().traceId;
    const inTrace = spans.filter((s) => s.spanContext().traceId === traceId);
    const scopes = new Set(inTrace.map((s) => s.instrumentationScope.name));
    expect([...scopes].sort()).toEqual(['portcullis-audit', 'portcullis-gateway', 'portcullis-policy']);

    const authorize = inTrace.find((s) => s.name === 'Authorize')!;
    expect(authorize.parentSpanContext?.spanId).toBe(call.spanContext().spanId);
    expect(authorize.attributes['portcullis.decision']).toBe('ALLOW');
    const writes = inTrace.filter((s) => s.name === 'audit.write');
    expect(writes.map((w) => w.attributes['portcullis.stage']).sort()).toEqual(['complete', 'decision']);
    for (const w of writes) expect(w.parentSpanContext?.spanId).toBe(call.spanContext().spanId);
  });
});
