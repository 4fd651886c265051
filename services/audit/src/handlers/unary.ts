import type * as grpc from '@grpc/grpc-js';
import { toServiceError, type AuditLogger } from './grpc-errors.ts';
import { forTenant, tenantOfRequest } from '../store/engine-turns.ts';

/**
 * Adapts `run(request)` to a unary gRPC handler. The callback is called exactly once, with
 * `return`, and outside the `try`, so a throwing callback can never trigger a second one.
 */
export function unaryHandler<Req, Res>(rpc: string, log: AuditLogger, run: (request: Req) => Promise<Res>): grpc.handleUnaryCall<Req, Res> {
  return async (call, callback) => {
    let response: Res;
    try {
      // The engine's turns are shared fairly between the tenants whose agents requests read.
      response = await forTenant(tenantOfRequest(call.request), () => run(call.request));
    } catch (err) {
      return callback(toServiceError(err, log, rpc));
    }
    return callback(null, response);
  };
}
