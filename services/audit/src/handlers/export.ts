import type * as grpc from '@grpc/grpc-js';
import type { ExportChunk, ExportRequest } from '@portcullis/core';
import type { AuditStore } from '../store/audit-store.ts';
import { CSV_HEADER, csvLine, ndjsonLine, redactPolicyIdentities } from './export-format.ts';
import { toServiceError, type AuditLogger } from './grpc-errors.ts';
import { parseExportRequest, type ParsedExportRequest } from './parse-request.ts';

/** Text gathered before one `ExportChunk` is sent. */
const CHUNK_CHARS = 64 * 1024;

type ExportCall = grpc.ServerWritableStream<ExportRequest, ExportChunk>;

/**
 * `Export`: streams matching entries as CSV (header first) or NDJSON, straight from the
 * store's streaming read. Memory stays flat: one store batch and one chunk at a time, and
 * the next batch is not read until gRPC has taken the previous chunks (backpressure). A
 * client that cancels stops the store query. Bad input fails before the first byte.
 */
export function exportHandler(deps: { store: Pick<AuditStore, 'stream'>; log: AuditLogger }): grpc.handleServerStreamingCall<ExportRequest, ExportChunk> {
  return async (call) => {
    let request: ParsedExportRequest;
    try {
      request = parseExportRequest(call.request);
    } catch (err) {
      return fail(call, err, deps.log);
    }
    try {
      await writeExport(call, request, deps.store);
    } catch (err) {
      if (call.cancelled) return;
      return fail(call, err, deps.log);
    }
    if (!call.cancelled) call.end();
  };
}

async function writeExport(call: ExportCall, request: ParsedExportRequest, store: Pick<AuditStore, 'stream'>): Promise<void> {
  const line = request.format === 'csv' ? csvLine : ndjsonLine;
  let pending = request.format === 'csv' ? CSV_HEADER : '';
  for await (const batch of store.stream(request.filter, request.page)) {
    for (const entry of batch) {
      pending += line(request.redactPolicyAgentIds.has(entry.agentId) ? redactPolicyIdentities(entry) : entry);
      if (pending.length >= CHUNK_CHARS) {
        await send(call, pending);
        pending = '';
      }
    }
    if (call.cancelled) return; // leaving the loop cancels the store's query
  }
  if (pending.length > 0) await send(call, pending);
}

/** Writes one chunk; when gRPC's buffer is full, waits until it drains (or the call ends). */
async function send(call: ExportCall, text: string): Promise<void> {
  if (call.write({ data: Buffer.from(text, 'utf8') })) return;
  await new Promise<void>((resolve) => {
    const done = () => {
      call.off('drain', done);
      call.off('cancelled', done);
      call.off('close', done);
      resolve();
    };
    call.on('drain', done);
    call.on('cancelled', done);
    call.on('close', done);
  });
}

/** Ends the stream with a status; grpc-js turns an emitted 'error' into the call's status. */
function fail(call: ExportCall, err: unknown, log: AuditLogger): void {
  call.emit('error', toServiceError(err, log, 'Export'));
}
