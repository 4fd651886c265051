import { Readable } from 'node:stream';
import * as grpc from '@grpc/grpc-js';
import type { ExportChunk } from '@portcullis/core';

/** How long an export may take to produce its first chunk before the gateway gives up (503). */
export const EXPORT_FIRST_CHUNK_TIMEOUT_MS = 30_000;
/** What the body holds before it pauses the call. */
const BODY_BUFFER_BYTES = 1024 * 1024;

/**
 * Turns a running `Export` call into an HTTP response body, once the call has proved it can
 * answer: resolves with the body when the first chunk (or a clean, empty end) arrives, and
 * rejects with the call's `grpc.ServiceError` if it fails before that — so bad input and an
 * unreachable audit service still become a proper 4xx/503 before any byte is sent.
 *
 * After that the body is a plain byte stream with end-to-end backpressure: when the HTTP
 * socket is slow, `push` returns false and the gRPC call is paused, which stops reading from
 * HTTP/2, whose flow control in turn stalls the audit service's writes. Destroying the body
 * (Fastify does this when the client disconnects) cancels the call, which cancels the store
 * query. A failure after the first byte destroys the body, so the client sees a cut-off
 * transfer rather than a complete-looking file.
 */
export function exportBody(call: grpc.ClientReadableStream<ExportChunk>, firstChunkTimeoutMs = EXPORT_FIRST_CHUNK_TIMEOUT_MS): Promise<Readable> {
  return new Promise<Readable>((resolve, reject) => {
    let started = false;
    let finished = false;
    const body = new Readable({
      // Chunks are up to 512 kB: at the default 16 kB mark every chunk would pause the call.
      highWaterMark: BODY_BUFFER_BYTES,
      read: () => { call.resume(); },
      destroy: (err, callback) => {
        if (!finished) call.cancel();
        callback(err);
      },
    });
    // A cancelled call fails with CANCELLED, which the REST error handler reports as 503.
    const timer = setTimeout(() => { if (!started) call.cancel(); }, firstChunkTimeoutMs);
    const start = () => {
      if (started) return;
      started = true;
      clearTimeout(timer);
      resolve(body);
    };
    call.on('data', (chunk: ExportChunk) => {
      start();
      if (body.destroyed) return;
      if (!body.push(chunk.data)) call.pause();
    });
    call.on('end', () => {
      finished = true;
      start();
      if (!body.destroyed) body.push(null);
    });
    call.on('error', (err: grpc.ServiceError) => {
      finished = true;
      clearTimeout(timer);
      if (!started) {
        started = true;
        reject(err);
      } else {
        body.destroy(err);
      }
    });
  });
}
