import * as grpc from '@grpc/grpc-js';
import type { AuthorizeRequest, AuthorizeStreamRequest, AuthorizeStreamResponse } from '@portcullis/core';
import type { Decide } from './authorize.ts';

export interface AuthorizeStreamHandler {
  handler: grpc.handleBidiStreamingCall<AuthorizeStreamRequest, AuthorizeStreamResponse>;
  /**
   * For shutdown, after the server stopped taking new streams: every open stream answers what
   * it has read and then ends (status OK). Requests read after that are left unanswered, so the
   * client may send them again elsewhere: they were never decided.
   */
  drain(): void;
}

/**
 * `AuthorizeStream`: many verdicts over one long-lived stream, each answer carrying the id of
 * its request, decided by the same `decide` as unary `Authorize`. A request that fails gets
 * its status in the answer (`error`); the stream goes on. The stream ends once the client has
 * half-closed it and every request it sent is answered.
 */
export function createAuthorizeStreamHandler(decide: Decide): AuthorizeStreamHandler {
  const open = new Set<() => void>();
  let draining = false;
  const handler: AuthorizeStreamHandler['handler'] = (call) => {
    let pending = 0;
    let ending = false;
    let gone = false;
    const forget = () => { gone = true; open.delete(stop); };
    const endWhenAnswered = () => {
      if (!ending || pending > 0 || gone) return;
      forget();
      call.end();
    };
    const stop = () => { ending = true; endWhenAnswered(); };
    open.add(stop);
    call.on('data', (message: AuthorizeStreamRequest) => {
      if (ending) return;
      pending++;
      decide(message.request ?? ({} as AuthorizeRequest), message.traceHeaders ?? {}, (err, value) => {
        pending--;
        if (!gone) {
          call.write(err
            ? { id: message.id, error: { code: err.code ?? grpc.status.INTERNAL, message: err.details ?? '' } }
            : { id: message.id, response: value! });
        }
        endWhenAnswered();
      });
    });
    call.on('end', stop);
    call.on('cancelled', forget);
    call.on('error', forget);
    if (draining) stop();
  };
  return {
    handler,
    drain() {
      draining = true;
      for (const stop of [...open]) stop();
    },
  };
}
