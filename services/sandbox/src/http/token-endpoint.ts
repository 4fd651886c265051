import type { IncomingMessage, ServerResponse } from 'node:http';
import { isJsonContentType } from '@modelcontextprotocol/sdk/shared/mediaType.js';
import { z } from 'zod';
import { issueSandboxToken } from '../sandbox-tokens.ts';
import { parseJson, readBody, sendJson } from './http-io.ts';

const MAX_TOKEN_REQUEST_BYTES = 16 * 1024;

const tokenRequestSchema = z.strictObject({
  login: z.string().trim().min(1).max(200),
  name: z.string().trim().min(1).max(200).optional(),
});

function sendTokenError(res: ServerResponse, status: number, error: string, description: string, headers: Record<string, string> = {}): void {
  sendJson(res, status, { error, error_description: description }, headers);
}

/**
 * `POST /_sandbox/<connector>/tokens` with `{login, name?}` → `{access_token, token_type}`:
 * how test fixtures and seeds in other processes get a member's token for a sandbox
 * connector. It stands in for the sandbox's OAuth authorization server, which comes later,
 * and exists only in the sandbox. Errors use the OAuth token endpoint's shape.
 */
export async function handleTokenRequest(req: IncomingMessage, res: ServerResponse, connectorKey: string, tokenKey: Buffer): Promise<void> {
  if (req.method !== 'POST') {
    sendTokenError(res, 405, 'invalid_request', 'Use POST', { allow: 'POST' });
    return;
  }
  if (!isJsonContentType(req.headers['content-type'])) {
    sendTokenError(res, 415, 'invalid_request', 'Content-Type must be application/json');
    return;
  }
  const read = await readBody(req, MAX_TOKEN_REQUEST_BYTES);
  if (read.kind === 'too_large') {
    sendTokenError(res, 413, 'invalid_request', `The body must not exceed ${MAX_TOKEN_REQUEST_BYTES} bytes`, { connection: 'close' });
    return;
  }
  const json = parseJson(read.text);
  if (!json) {
    sendTokenError(res, 400, 'invalid_request', 'The body is not valid JSON');
    return;
  }
  const request = tokenRequestSchema.safeParse(json.value);
  if (!request.success) {
    const problems = request.error.issues.map((issue) => `${issue.path.join('.') || 'body'}: ${issue.message}`);
    sendTokenError(res, 400, 'invalid_request', problems.join('; '));
    return;
  }
  const { login, name } = request.data;
  const accessToken = issueSandboxToken(tokenKey, connectorKey, name !== undefined ? { login, name } : { login });
  sendJson(res, 200, { access_token: accessToken, token_type: 'Bearer' }, { 'cache-control': 'no-store' });
}
