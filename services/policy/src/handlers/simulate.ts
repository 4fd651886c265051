import type * as grpc from '@grpc/grpc-js';
import { PolicyServiceError } from '../errors.ts';
import { toGrpcError } from './grpc-status.ts';

/**
 * `Simulate`: replaying audit traffic against a draft is not served by this version (it
 * arrives with the policy-conditions work); answers UNIMPLEMENTED, which callers can tell
 * apart from an outage.
 */
export function createSimulateHandler(): grpc.handleUnaryCall<unknown, never> {
  return (_call, callback) =>
    callback(toGrpcError(new PolicyServiceError('not_implemented', 'Simulate is not implemented yet: replaying audit traffic against a draft comes with policy conditions')));
}
