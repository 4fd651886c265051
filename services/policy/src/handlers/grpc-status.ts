import * as grpc from '@grpc/grpc-js';
import { PolicyServiceError, type PolicyServiceErrorCode } from '../errors.ts';

/** The one place where failures become gRPC statuses. Verdicts (ALLOW/DENY) never pass here. */
export function grpcStatusOf(code: PolicyServiceErrorCode): grpc.status {
  switch (code) {
    case 'invalid_request': return grpc.status.INVALID_ARGUMENT;
    case 'unavailable': return grpc.status.UNAVAILABLE;
    case 'not_implemented': return grpc.status.UNIMPLEMENTED;
  }
}

/**
 * The status to answer with for `err`. A `PolicyServiceError` keeps its message; anything
 * else is a bug, reported on stderr and answered INTERNAL without its text.
 */
export function toGrpcError(err: unknown): Partial<grpc.StatusObject> {
  if (err instanceof PolicyServiceError) return { code: grpcStatusOf(err.code), details: err.message };
  console.error('policy: unexpected error while answering a call', err);
  return { code: grpc.status.INTERNAL, details: 'The policy decision point failed unexpectedly' };
}
