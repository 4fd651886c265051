import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuditQueryService, bindServer, type ExportChunk, type ExportRequest } from '@portcullis/core';
import { createAuditClient, type AuditClient } from './audit-client.ts';
import { exportBody } from './export-body.ts';

/**
 * `exportBody` against a real gRPC server whose `Export` follows a script chosen by the
 * request's `format` field, to produce what the real audit service rarely does on demand
 * (a stall before the first chunk, a failure mid-stream, an endless producer). The real
 * service's exports through the gateway are in test/integration/audit-api.test.ts.
 */

type Script = (call: grpc.ServerWritableStream<ExportRequest, ExportChunk>) => void | Promise<void>;
const MB = Buffer.alloc(1024 * 1024, 'x');
const producer = { written: 0, cancelled: false };

const scripts: Record<string, Script> = {
  three: (call) => {
    for (const text of ['a,b\r\n', '1,2\r\n', '3,4\r\n']) call.write({ data: Buffer.from(text) });
    call.end();
  },
  empty: (call) => { call.end(); },
  invalid: (call) => { call.emit('error', { code: grpc.status.INVALID_ARGUMENT, details: 'to must be an ISO 8601 date or date-time that exists, got "2026-02-30"' }); },
  stall: () => undefined,
  'fail-midway': (call) => {
    call.write({ data: Buffer.from('header\r\n') });
    setTimeout(() => call.emit('error', { code: grpc.status.INTERNAL, details: 'audit Export failed' }), 20);
  },
  endless: async (call) => {
    producer.written = 0;
    producer.cancelled = false;
    call.on('cancelled', () => { producer.cancelled = true; });
    while (!producer.cancelled) {
      producer.written += 1;
      if (!call.write({ data: MB })) {
        await new Promise<void>((resolve) => {
          call.once('drain', resolve);
          call.once('cancelled', resolve);
        });
      }
    }
  },
};

let server: grpc.Server;
let client: AuditClient;

beforeAll(async () => {
  server = new grpc.Server();
  server.addService(AuditQueryService.service, {
    Export: (call: grpc.ServerWritableStream<ExportRequest, ExportChunk>) => { void scripts[call.request.format]!(call); },
  });
  client = createAuditClient(await bindServer(server, '127.0.0.1:0'));
});
afterAll(async () => {
  client?.close();
  server?.forceShutdown();
});

const start = (format: string) => client.export({
  filter: { agentIds: [], from: '', to: '', agent: '', service: '', tool: '', result: '', member: '', policy: '' },
  limit: 0, offset: 0, format, redactPolicyAgentIds: [],
});
const text = async (body: NodeJS.ReadableStream) => {
  const parts: Buffer[] = [];
  for await (const part of body) parts.push(part as Buffer);
  return Buffer.concat(parts).toString('utf8');
};
const until = async (condition: () => boolean) => {
  for (let i = 0; i < 200 && !condition(); i += 1) await new Promise((r) => setTimeout(r, 10));
  expect(condition()).toBe(true);
};

describe('exportBody', () => {
  it('resolves once the first chunk arrived and then yields every chunk in order', async () => {
    expect(await text(await exportBody(start('three')))).toBe('a,b\r\n1,2\r\n3,4\r\n');
  });

  it('resolves with an empty body for an export that ends without a chunk', async () => {
    expect(await text(await exportBody(start('empty')))).toBe('');
  });

  it('rejects with the gRPC status when the call fails before the first chunk', async () => {
    const err = await exportBody(start('invalid')).then(() => undefined, (e: grpc.ServiceError) => e);
    expect(err?.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(err?.details).toBe('to must be an ISO 8601 date or date-time that exists, got "2026-02-30"');
  });

  it('cancels the call and rejects when no first chunk arrives in time', async () => {
    const err = await exportBody(start('stall'), 50).then(() => undefined, (e: grpc.ServiceError) => e);
    expect(err?.code).toBe(grpc.status.CANCELLED);
  });

  it('fails the body (no clean end) when the call fails after the first chunk', async () => {
    const body = await exportBody(start('fail-midway'));
    await expect(text(body)).rejects.toMatchObject({ code: grpc.status.INTERNAL });
  });

  it('applies backpressure to the producer while nobody reads, and cancels it when the body is destroyed', async () => {
    const body = await exportBody(start('endless'));
    // Nobody reads: the producer must stall after what the buffers (body, gRPC, HTTP/2) hold.
    // An endless producer without backpressure writes hundreds of MB a second; with it, what it
    // wrote stays under 64 MB however long nobody reads (on a loaded machine the buffers take a
    // while to fill, so no exact stall point is asserted).
    await new Promise((r) => setTimeout(r, 1_000));
    expect(producer.written).toBeLessThan(64);
    await new Promise((r) => setTimeout(r, 1_000));
    const stalledAt = producer.written;
    expect(stalledAt).toBeLessThan(64);
    // Reading lets it continue.
    let read = 0;
    for await (const part of body) {
      read += (part as Buffer).length;
      if (read > (stalledAt + 8) * MB.length) break; // leaving the loop destroys the body
    }
    expect(producer.written).toBeGreaterThan(stalledAt);
    await until(() => producer.cancelled);
  });
});
