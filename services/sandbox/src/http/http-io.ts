import type { IncomingMessage, ServerResponse } from 'node:http';

/** The MCP SDK's own default limit for a JSON-RPC request body. */
export const MAX_MCP_BODY_BYTES = 4 * 1024 * 1024;

/** A request body read as text, or the news that it was over the limit. */
export type BodyRead = { kind: 'read'; text: string } | { kind: 'too_large' };

/** Reads a request body as UTF-8 text, stopping as soon as it exceeds `maxBytes`. */
export function readBody(req: IncomingMessage, maxBytes: number): Promise<BodyRead> {
  if (Number(req.headers['content-length']) > maxBytes) return Promise.resolve({ kind: 'too_large' });
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    req.on('data', (chunk: Buffer) => {
      if (settled) return;
      size += chunk.length;
      if (size > maxBytes) {
        settled = true;
        resolve({ kind: 'too_large' });
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (settled) return;
      settled = true;
      resolve({ kind: 'read', text: Buffer.concat(chunks).toString('utf8') });
    });
    req.on('error', (error) => {
      if (settled) return;
      settled = true;
      reject(error);
    });
  });
}

/** Parses JSON text; undefined when it is not JSON. */
export function parseJson(text: string): { value: unknown } | undefined {
  try {
    return { value: JSON.parse(text) as unknown };
  } catch {
    return undefined;
  }
}

/** Sends a JSON body with its length. */
export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

/**
 * A JSON-RPC error outside any session, shaped as the SDK's transport shapes its own
 * (`-32000` bad request, `-32001` session not found, `-32700` parse error).
 */
export function sendJsonRpcError(res: ServerResponse, status: number, code: number, message: string, headers: Record<string, string> = {}): void {
  sendJson(res, status, { jsonrpc: '2.0', error: { code, message }, id: null }, headers);
}
