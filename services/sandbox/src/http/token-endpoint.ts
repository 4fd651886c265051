import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';
import { issueSandboxToken } from '../sandbox-tokens.ts';
import { sendJson } from './http-io.ts';
import { readJsonRequest } from './json-request.ts';

const MAX_TOKEN_REQUEST_BYTES = 16 * 1024;

/** A member's login: trimmed, 1–200 characters. */
export const loginSchema = z.string().trim().min(1).max(200);

const tokenRequestSchema = z.strictObject({
  login: loginSchema,
  name: z.string().trim().min(1).max(200).optional(),
});

/** An error in the OAuth token endpoint's shape `{error, error_description}`, as every `/_sandbox` route answers them. */
export function sendControlError(res: ServerResponse, status: number, error: string, description: string, headers: Record<string, string> = {}): void {
  sendJson(res, status, { error, error_description: description }, headers);
}

/**
 * Reads the JSON body of a `/_sandbox` POST route against `schema`, answering the error
 * itself (405, 415, 413, 400 `invalid_request`) when it cannot; undefined then.
 */
export async function readControlRequest<S extends z.ZodType>(req: IncomingMessage, res: ServerResponse, schema: S, maxBytes = MAX_TOKEN_REQUEST_BYTES): Promise<z.output<S> | undefined> {
  if (req.method !== 'POST') {
    sendControlError(res, 405, 'invalid_request', 'Use POST', { allow: 'POST' });
    return undefined;
  }
  const read = await readJsonRequest(req, schema, maxBytes);
  if (!read.ok) {
    sendControlError(res, read.status, 'invalid_request', read.description, read.headers);
    return undefined;
  }
  return read.data;
}

/**
 * `POST /_sandbox/<connector>/tokens` with `{login, name?}` → `{access_token, token_type}`:
 * how test fixtures and seeds in other processes get a member's token for a sandbox
 * connector without going through OAuth. The token never expires and belongs to no grant.
 * It exists only in the sandbox. Errors use the OAuth token endpoint's shape.
 */
export async function handleTokenRequest(req: IncomingMessage, res: ServerResponse, connectorKey: string, tokenKey: Buffer): Promise<void> {
  const request = await readControlRequest(req, res, tokenRequestSchema);
  if (request === undefined) return;
  const { login, name } = request;
  const accessToken = issueSandboxToken(tokenKey, connectorKey, name !== undefined ? { login, name } : { login });
  sendJson(res, 200, { access_token: accessToken, token_type: 'Bearer' }, { 'cache-control': 'no-store' });
}
