import type { FastifyInstance } from 'fastify';

export type HealthProbe = () => Promise<void>;

/** GET /api/status: each dependency's health; 200 when all are up, else 503. */
export async function statusRoutes(app: FastifyInstance, options: { probes: Record<string, HealthProbe> }) {
  app.get('/api/status', async (_request, reply) => {
    const checks = await Promise.all(Object.entries(options.probes).map(async ([name, probe]) => {
      const started = performance.now();
      try {
        await Promise.race([probe(), new Promise((_, reject) => setTimeout(() => reject(new Error('timeout')), 2_000))]);
        return [name, { status: 'up', latencyMs: Math.round(performance.now() - started) }] as const;
      } catch {
        return [name, { status: 'down' }] as const;
      }
    }));
    const healthy = checks.every(([, c]) => c.status === 'up');
    return reply.code(healthy ? 200 : 503).send({ status: healthy ? 'ok' : 'degraded', dependencies: Object.fromEntries(checks) });
  });
}
