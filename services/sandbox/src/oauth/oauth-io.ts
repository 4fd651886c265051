import type { IncomingMessage, ServerResponse } from 'node:http';
import { readBody, sendJson } from '../http/http-io.ts';

/** Bodies of the OAuth endpoints: client ids carry their redirect URIs, so allow a few of them. */
export const MAX_OAUTH_BODY_BYTES = 64 * 1024;

/** Error codes of RFC 6749 §5.2, RFC 7591 §3.2.2 and RFC 8707 that the endpoints answer. */
export type OAuthErrorCode = 'invalid_request' | 'invalid_client' | 'invalid_grant' | 'unsupported_grant_type' | 'invalid_target' | 'invalid_redirect_uri' | 'invalid_client_metadata';

/** An OAuth error body `{error, error_description}`; never cached. */
export function sendOAuthError(res: ServerResponse, status: number, error: OAuthErrorCode, description: string, headers: Record<string, string> = {}): void {
  sendJson(res, status, { error, error_description: description }, { 'cache-control': 'no-store', ...headers });
}

/** A JSON answer that carries credentials or tokens: never cached (RFC 6749 §5.1). */
export function sendNoStoreJson(res: ServerResponse, status: number, body: unknown): void {
  sendJson(res, status, body, { 'cache-control': 'no-store', pragma: 'no-cache' });
}

/** Pages of the authorization endpoint: no scripts, no framing (clickjacking), never cached. */
export function sendHtml(res: ServerResponse, status: number, html: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, {
    ...headers,
    'content-type': 'text/html; charset=utf-8',
    'content-length': Buffer.byteLength(html),
    'cache-control': 'no-store',
    'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
    'x-frame-options': 'DENY',
    'referrer-policy': 'no-referrer',
  });
  res.end(html);
}

/** A 302 to `location`; for redirects back to a client's verified redirect URI. */
export function sendRedirect(res: ServerResponse, location: string): void {
  res.writeHead(302, { location, 'cache-control': 'no-store', 'content-length': 0 });
  res.end();
}

/**
 * OAuth request parameters (query or form). RFC 6749 §3.1: a parameter sent without a value
 * counts as omitted, and none may be sent twice; `duplicates` names those that were.
 */
export interface OAuthParams {
  get(name: string): string | undefined;
  readonly duplicates: readonly string[];
}

/** Reads parameters from a query string or an `application/x-www-form-urlencoded` body. */
export function oauthParamsOf(encoded: string): OAuthParams {
  const search = new URLSearchParams(encoded);
  const values = new Map<string, string>();
  const duplicates = new Set<string>();
  for (const [name, value] of search) {
    if (value === '') continue;
    if (values.has(name)) duplicates.add(name);
    else values.set(name, value);
  }
  return { get: (name) => values.get(name), duplicates: [...duplicates] };
}

/** The query string of a request URL, without the `?`. */
export function queryOf(req: IncomingMessage): string {
  const url = req.url ?? '';
  const mark = url.indexOf('?');
  return mark < 0 ? '' : url.slice(mark + 1);
}

/** Whether a request declares an `application/x-www-form-urlencoded` body. */
export function isFormContentType(req: IncomingMessage): boolean {
  const type = req.headers['content-type'];
  return type !== undefined && type.split(';')[0]?.trim().toLowerCase() === 'application/x-www-form-urlencoded';
}

/** A form body read and split into parameters, or why it could not be. */
export type FormRead = { ok: true; params: OAuthParams } | { ok: false; status: 400 | 413; description: string; headers: Record<string, string> };

/**
 * Reads an `application/x-www-form-urlencoded` body of at most 64 KiB. Another content type
 * is a 400 (RFC 6749 asks for this encoding; `invalid_request`), a larger body a 413 that
 * closes the connection, since the rest of the body is left unread.
 */
export async function readForm(req: IncomingMessage): Promise<FormRead> {
  if (!isFormContentType(req)) return { ok: false, status: 400, description: 'Content-Type must be application/x-www-form-urlencoded', headers: {} };
  const read = await readBody(req, MAX_OAUTH_BODY_BYTES);
  if (read.kind === 'too_large') return { ok: false, status: 413, description: `The body must not exceed ${MAX_OAUTH_BODY_BYTES} bytes`, headers: { connection: 'close' } };
  return { ok: true, params: oauthParamsOf(read.text) };
}

/** `405` with `Allow`, in the OAuth error shape. */
export function sendMethodNotAllowed(res: ServerResponse, allow: string): void {
  sendOAuthError(res, 405, 'invalid_request', `Use ${allow}`, { allow });
}
