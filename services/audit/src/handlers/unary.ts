import type * as grpc from '@grpc/grpc-js';
import { toServiceError, type AuditLogger } from './grpc-errors.ts';

/**
 * Adapts `run(request)` to a unary gRPC handler. The callback is called exactly once, with
 * `return`, and outside the `try`, so a throwing callback can never trigger a second one.
 */
export function unaryHandler<Req, Res>(rpc: string, log: AuditLogger, run: (request: Req) => Promise<Res>): grpc.handleUnaryCall<Req, Res> {
  return async (call, callback) => {
    let response: Res;
    try {
      response = await run(call.request);
    } catch (err) {
      return callback(toServiceError(err, log, rpc));
    }
    return callback(null, response);
  };
}
