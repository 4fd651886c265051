/**
 * REST error codes. Each code has exactly one HTTP status; the body is always
 * `{"error":{"code","message","requestId"?,"details"?}}`.
 */
export type ApiErrorCode =
  /** The body, query or path failed validation; `details.field` names the field. */
  | 'invalid_request'
  /** No valid session cookie (or member key) was presented. */
  | 'unauthenticated'
  /** The caller is known but lacks the role the route requires. */
  | 'forbidden'
  /** The resource does not exist, or the caller may not learn that it exists. */
  | 'not_found'
  /** The request conflicts with the current state (duplicate, wrong state). */
  | 'conflict'
  /** The body exceeds the configured size limit. */
  | 'payload_too_large'
  /** Too many requests from this address or account. */
  | 'rate_limited'
  /** A dependency (database, bus, policy or audit service) cannot be reached. */
  | 'unavailable';

export function statusOf(code: ApiErrorCode): number {
  switch (code) {
    case 'invalid_request': return 400;
    case 'unauthenticated': return 401;
    case 'forbidden': return 403;
    case 'not_found': return 404;
    case 'conflict': return 409;
    case 'payload_too_large': return 413;
    case 'rate_limited': return 429;
    case 'unavailable': return 503;
  }
}

export class ApiError extends Error {
  override readonly name = 'ApiError';
  constructor(
    readonly code: ApiErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }

  get status(): number {
    return statusOf(this.code);
  }

  toBody(requestId?: string): { error: { code: ApiErrorCode; message: string; requestId?: string; details?: Record<string, unknown> } } {
    return {
      error: {
        code: this.code,
        message: this.message,
        ...(requestId ? { requestId } : {}),
        ...(this.details ? { details: this.details } : {}),
      },
    };
  }
}
