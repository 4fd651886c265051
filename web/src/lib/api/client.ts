/**
 * The dashboard's one way to reach the gateway: same-origin requests to `/api/...` with the
 * session cookie. `http` is an openapi-fetch client typed by the generated `openapi.d.ts`
 * (decision 040): a call names the route's path template, so a route the gateway renames,
 * removes or reshapes fails the dashboard's type-check. `call()` turns its answer into the data
 * or an `ApiError` carrying the API's error code, message, details, request id and
 * `Retry-After` (DESIGN §3: `{"error":{"code","message","requestId","details"}}`).
 *
 * A 401 from any route but sign-in's own, or a 403 saying MFA is pending, also tells the
 * layout (`onSessionLost`), which returns the reader to sign-in and back afterwards.
 */
import createClient from 'openapi-fetch';
import type { paths } from './openapi.d.ts';
import { ApiError } from './api-error.ts';

export { ApiError };

/** The request was refused because the session ended, or because MFA is still to be done. */
export type SessionLoss = 'signed_out' | 'mfa_required' | 'mfa_enrolment_required';
let sessionLost: ((why: SessionLoss) => void) | undefined;

/** The layout's handler for a session lost mid-way (one at a time; the latest wins). */
export function onSessionLost(handler: (why: SessionLoss) => void): void {
  sessionLost = handler;
}

function reportSessionLoss(path: string, error: ApiError): void {
  // Sign-in's own routes answer 401 for a wrong code: that is the form's business.
  if (/^\/api\/auth\/(?!logout)/.test(path)) return;
  if (error.status === 401) sessionLost?.('signed_out');
  const reason = error.details?.reason;
  if (error.status === 403 && (reason === 'mfa_required' || reason === 'mfa_enrolment_required')) sessionLost?.(reason);
}

type ErrorBody = { error?: { code?: string; message?: string; requestId?: string; details?: Record<string, unknown> } };

/** The `ApiError` of a non-2xx answer whose body (parsed, when JSON) is `body`. */
export function apiErrorOf(response: Response, body: unknown): ApiError {
  const error = (body as ErrorBody | undefined)?.error;
  const header = Number(response.headers.get('retry-after'));
  const detailed = Number(error?.details?.retryAfterSeconds);
  const retryAfter = Number.isFinite(header) && header > 0 ? header : Number.isFinite(detailed) && detailed > 0 ? detailed : undefined;
  return new ApiError(
    response.status,
    error?.code ?? 'http_error',
    error?.message ?? `The server answered ${response.status}.`,
    error?.details,
    error?.requestId ?? response.headers.get('request-id') ?? undefined,
    response.status === 429 ? retryAfter ?? 60 : retryAfter,
  );
}

const networkError = () => new ApiError(0, 'network', 'The server could not be reached. Check your connection and try again.');

/** The typed client: `http.GET('/api/agents/{id}', { params: { path: { id } } })`; wrap it in `call()`. */
export const http = createClient<paths>({ credentials: 'same-origin', fetch: (request) => globalThis.fetch(request) });

/**
 * The data of a typed call, or its failure as an `ApiError` (network failures too).
 * `call(http.GET('/api/agents', { params: { query } }))`.
 */
export async function call<D>(pending: Promise<{ data?: D; error?: unknown; response: Response }>): Promise<D> {
  let answer: { data?: D; error?: unknown; response: Response };
  try {
    answer = await pending;
  } catch {
    throw networkError();
  }
  if (!answer.response.ok) {
    const error = apiErrorOf(answer.response, answer.error);
    reportSessionLoss(new URL(answer.response.url || '/', 'http://x').pathname, error);
    throw error;
  }
  return answer.data as D;
}

/** Query values as the API takes them: empty strings, null and undefined left out. */
export function query<Q extends object>(values: Q): Q {
  return Object.fromEntries(Object.entries(values).filter(([, v]) => v !== undefined && v !== null && v !== '')) as Q;
}

type Method = 'get' | 'post' | 'put' | 'delete';
type Operation<P extends keyof paths, M extends Method> = NonNullable<paths[P][M]>;
type JsonOf<R> = R extends { content: { 'application/json': infer J } } ? J : never;

/** The JSON a route answers on success (its 200 or 201), as the gateway's schema declares it. */
export type Answer<P extends keyof paths, M extends Method = 'get'> =
  Operation<P, M> extends { responses: infer R }
    ? R extends { 200: infer OK } ? JsonOf<OK> : R extends { 201: infer Created } ? JsonOf<Created> : never
    : never;

/** The JSON body a route takes. */
export type Body<P extends keyof paths, M extends Method> =
  Operation<P, M> extends { requestBody?: infer B } ? JsonOf<NonNullable<B>> : never;

/** The query a route takes. */
export type Query<P extends keyof paths, M extends Method = 'get'> =
  Operation<P, M> extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never;

export { describeError, fieldErrorsOf, messageOf } from './errors.ts';
