import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { ApiError, metricsRegistry } from '@portcullis/core';

const digest = (value: string) => createHash('sha256').update(value).digest();

/**
 * `GET /metrics` (Prometheus text) on the gateway's own port (decision 068). With
 * `METRICS_TOKEN` set, only a scraper sending `Authorization: Bearer <token>` is answered
 * (401 otherwise). Without it, the route is not mounted in production (404 like any unknown
 * path) and is anonymous elsewhere, for local development.
 */
export async function metricsRoutes(app: FastifyInstance, options: { token: string | undefined; production: boolean }) {
  if (options.production && !options.token) return;
  // Digests compared in constant time: the token's length is not told by timing either.
  const expected = options.token ? digest(`Bearer ${options.token}`) : undefined;
  app.get('/metrics', { schema: { hide: true } }, async (request, reply) => {
    if (expected && !timingSafeEqual(digest(request.headers.authorization ?? ''), expected)) {
      reply.header('www-authenticate', 'Bearer realm="metrics"');
      throw new ApiError('unauthenticated', 'Send the metrics token: Authorization: Bearer <METRICS_TOKEN>.');
    }
    return reply.type(metricsRegistry.contentType).send(await metricsRegistry.metrics());
  });
}
