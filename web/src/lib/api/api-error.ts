/** A non-2xx answer of the gateway (or no answer at all: `status` 0), as `client.ts` reads it. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: Record<string, unknown>,
    /** The gateway's id of the request (its logs have it): shown on failures for support. */
    readonly requestId?: string,
    /** Seconds the server asked to wait (`Retry-After`, or `details.retryAfterSeconds`), on a 429. */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }

  /** The field the API named as wrong, if any (e.g. `conditions.timeWindow.timeZone`). */
  get field(): string | undefined {
    const field = this.details?.field;
    return typeof field === 'string' ? field : undefined;
  }

  /** Whether trying the same request again may help (the server or the network, not the input). */
  get retryable(): boolean {
    return this.status === 0 || this.status === 429 || this.status >= 500;
  }
}
