import type { FastifyReply, FastifyRequest } from 'fastify';

/** The first value of a request header. */
export function headerOf(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** A JSON-RPC error answer with its HTTP status (`id` null when the request had none or was not read). */
export function rpcError(reply: FastifyReply, status: number, code: number, message: string, id: unknown = null, data?: unknown) {
  return reply.code(status).type('application/json').send(JSON.stringify({ jsonrpc: '2.0', id, error: { code, message, ...(data !== undefined ? { data } : {}) } }));
}

/**
 * A client-supplied name or version as stored with its tool session and shown in the dashboard:
 * control characters dropped (NUL cannot be stored in Postgres), at most `max` characters.
 */
export function storedClientText(value: unknown, max = 200): string {
  return typeof value === 'string' ? value.replace(/[\u0000-\u001F\u007F]/g, '').slice(0, max) : '';
}
