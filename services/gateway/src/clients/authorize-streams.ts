import * as grpc from '@grpc/grpc-js';
import {
  currentTraceHeaders, type AuthorizeRequest, type AuthorizeResponse, type AuthorizeStreamRequest, type AuthorizeStreamResponse,
} from '@portcullis/core';

export interface AuthorizeStreamsOptions {
  /** A request unanswered this long rejects with DEADLINE_EXCEEDED (`POLICY_TIMEOUT_MS`). */
  timeoutMs: number;
  /** Streams kept open on the channel; each new one goes to the next PDP replica (round robin). Default 4. */
  streams?: number;
  /** A stream older than this takes no new request and is replaced, so load follows replicas that came back. Default 10 s. */
  maxStreamAgeMs?: number;
  /** Asks a PDP that has no `AuthorizeStream` (an older release): unary `Authorize`. */
  unary(request: AuthorizeRequest): Promise<AuthorizeResponse>;
}

export interface AuthorizeStreams {
  /** A verdict; rejects with the request's gRPC status, when its stream breaks, or past the deadline. */
  authorize(request: AuthorizeRequest): Promise<AuthorizeResponse>;
  /** Rejects what is in flight and closes the streams (not the channel). */
  close(): void;
}

interface Pending {
  message: AuthorizeStreamRequest;
  resolve(response: AuthorizeResponse): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
  /** Sent again once already, after its stream ended without reading it. */
  resent: boolean;
  stream?: Stream;
}

interface Stream {
  call: grpc.ClientDuplexStream<AuthorizeStreamRequest, AuthorizeStreamResponse>;
  pending: Map<number, Pending>;
  openedAt: number;
  /** Half-closed by us (too old) or ended: takes no new request. */
  retired: boolean;
}

const DEFAULT_STREAMS = 4;
const DEFAULT_MAX_STREAM_AGE_MS = 10_000;
/** After a PDP answered UNIMPLEMENTED to the stream, unary calls for this long before trying again. */
const UNARY_AFTER_UNIMPLEMENTED_MS = 30_000;

/**
 * Verdicts over a few long-lived `AuthorizeStream` streams on one channel (decision 031):
 * requests are spread over the streams in turn and matched to their answers by id, so a call
 * costs one message each way instead of an HTTP/2 stream set-up. Fails closed: a broken
 * stream rejects everything in flight on it at once and the next request opens a new one; a
 * request past its deadline rejects. A stream the PDP ended gracefully (its shutdown) had
 * answered everything it read, so what it left unanswered is sent once more on a fresh stream.
 */
export function createAuthorizeStreams(client: grpc.Client, options: AuthorizeStreamsOptions): AuthorizeStreams {
  const slots: Array<Stream | undefined> = new Array(options.streams ?? DEFAULT_STREAMS);
  /** Every stream not yet ended, retired ones still answering included. */
  const live = new Set<Stream>();
  const maxAgeMs = options.maxStreamAgeMs ?? DEFAULT_MAX_STREAM_AGE_MS;
  const openCall = (client as unknown as Record<string, () => Stream['call']>)['AuthorizeStream']!.bind(client);
  let turn = 0;
  let lastId = 0;
  let unaryUntil = 0;
  let closed = false;

  function open(): Stream {
    const stream: Stream = { call: openCall(), pending: new Map(), openedAt: Date.now(), retired: false };
    stream.call.on('data', (answer: AuthorizeStreamResponse) => {
      const pending = stream.pending.get(answer.id);
      if (!pending) return; // past its deadline already
      stream.pending.delete(answer.id);
      clearTimeout(pending.timer);
      if (answer.error) pending.reject(statusError(answer.error.code, answer.error.message));
      else pending.resolve(answer.response!);
    });
    // Every answer was read first: what is left, the PDP never read.
    stream.call.on('end', () => settle(stream, undefined));
    stream.call.on('error', (err: grpc.ServiceError) => settle(stream, err));
    live.add(stream);
    return stream;
  }

  function settle(stream: Stream, err: grpc.ServiceError | undefined) {
    stream.retired = true;
    live.delete(stream);
    const left = [...stream.pending.values()];
    stream.pending.clear();
    if (err?.code === grpc.status.UNIMPLEMENTED) unaryUntil = Date.now() + UNARY_AFTER_UNIMPLEMENTED_MS;
    for (const pending of left) {
      if (err?.code === grpc.status.UNIMPLEMENTED) sendUnary(pending);
      else if (err || pending.resent || closed) pending.reject(err ?? statusError(grpc.status.UNAVAILABLE, 'The Authorize stream ended'));
      else { pending.resent = true; send(pending); }
    }
  }

  function nextStream(): Stream {
    const slot = turn;
    turn = (turn + 1) % slots.length;
    const current = slots[slot];
    if (current && !current.retired && Date.now() - current.openedAt < maxAgeMs) return current;
    if (current && !current.retired) {
      // Too old: answers what it has, then ends; new requests go to a fresh stream (maybe another replica).
      current.retired = true;
      current.call.end();
    }
    return (slots[slot] = open());
  }

  function send(pending: Pending) {
    const stream = nextStream();
    pending.stream = stream;
    stream.pending.set(pending.message.id, pending);
    stream.call.write(pending.message);
  }

  function sendUnary(pending: Pending) {
    options.unary(pending.message.request).then((response) => {
      clearTimeout(pending.timer);
      pending.resolve(response);
    }, pending.reject);
  }

  return {
    authorize(request) {
      return new Promise<AuthorizeResponse>((resolve, reject) => {
        if (closed) return reject(statusError(grpc.status.CANCELLED, 'The policy client is closed'));
        lastId = (lastId % 0xffff_ffff) + 1;
        const pending: Pending = {
          message: { id: lastId, request, traceHeaders: currentTraceHeaders() }, resolve, reject, resent: false,
          timer: setTimeout(() => {
            pending.stream?.pending.delete(pending.message.id);
            reject(statusError(grpc.status.DEADLINE_EXCEEDED, `No verdict within ${options.timeoutMs} ms`));
          }, options.timeoutMs),
        };
        if (Date.now() < unaryUntil) sendUnary(pending);
        else send(pending);
      });
    },
    close() {
      closed = true;
      for (const stream of live) {
        for (const pending of stream.pending.values()) {
          clearTimeout(pending.timer);
          pending.reject(statusError(grpc.status.CANCELLED, 'The policy client is closed'));
        }
        stream.pending.clear();
        stream.retired = true;
        stream.call.cancel();
      }
    },
  };
}

/** An error shaped like grpc-js's own `ServiceError`, so callers see one kind of failure. */
function statusError(code: grpc.status, details: string): grpc.ServiceError {
  return Object.assign(new Error(`${code} ${grpc.status[code]}: ${details}`), { code, details, metadata: new grpc.Metadata() });
}
