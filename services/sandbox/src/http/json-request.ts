import type { IncomingMessage } from 'node:http';
import { isJsonContentType } from '@modelcontextprotocol/sdk/shared/mediaType.js';
import type { z } from 'zod';
import { parseJson, readBody } from './http-io.ts';

/** A JSON body that passed its schema, or the status, message and headers to refuse it with. */
export type JsonRequestRead<T> = { ok: true; data: T } | { ok: false; status: 400 | 413 | 415; description: string; headers: Record<string, string> };

/** One line naming each problem zod found, e.g. `login: Too small…; body: Unrecognized key "admin"`. */
export function problemsOf(error: z.ZodError): string {
  return error.issues.map((issue) => `${issue.path.join('.') || 'body'}: ${issue.message}`).join('; ');
}

/**
 * Reads a JSON request body and checks it against `schema`: 415 when it is not declared
 * JSON, 413 (closing the connection, the rest is unread) when over `maxBytes`, 400 when it
 * is not JSON or does not fit the schema.
 */
export async function readJsonRequest<S extends z.ZodType>(req: IncomingMessage, schema: S, maxBytes: number): Promise<JsonRequestRead<z.output<S>>> {
  if (!isJsonContentType(req.headers['content-type'])) return { ok: false, status: 415, description: 'Content-Type must be application/json', headers: {} };
  const read = await readBody(req, maxBytes);
  if (read.kind === 'too_large') return { ok: false, status: 413, description: `The body must not exceed ${maxBytes} bytes`, headers: { connection: 'close' } };
  const json = parseJson(read.text);
  if (!json) return { ok: false, status: 400, description: 'The body is not valid JSON', headers: {} };
  const parsed = schema.safeParse(json.value);
  if (!parsed.success) return { ok: false, status: 400, description: problemsOf(parsed.error), headers: {} };
  return { ok: true, data: parsed.data };
}
