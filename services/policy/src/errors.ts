/**
 * Failures of the decision point itself. A DENY is never one of these: it is a verdict value.
 * Each code maps to exactly one gRPC status, in `handlers/grpc-status.ts`.
 */
export type PolicyServiceErrorCode =
  /** The request is malformed (missing agent, member, service or tool; arguments not a JSON object). Retrying the same request cannot help. */
  | 'invalid_request'
  /** A dependency (the policy store) cannot be reached. A retry may help. */
  | 'unavailable'
  /** The RPC exists in the contract but is not served by this version. */
  | 'not_implemented';

export class PolicyServiceError extends Error {
  override readonly name = 'PolicyServiceError';
  constructor(readonly code: PolicyServiceErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
  }

  /** Whether sending the same request again may succeed. */
  get retryable(): boolean {
    return this.code === 'unavailable';
  }
}
