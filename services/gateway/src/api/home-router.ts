import type { FastifyInstance } from 'fastify';

const page = (mcpUrl: string) => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Portcullis</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:4rem auto;padding:0 1rem;color:#1f2933}code{background:#f0f2f5;padding:.1rem .3rem;border-radius:4px}</style>
</head><body>
<h1>Portcullis</h1>
<p>A policy-enforcing proxy between AI agents and the tool servers they use.</p>
<ul>
<li>MCP endpoint: <code>${mcpUrl}</code> (Bearer member key)</li>
<li>REST API: <code>/api</code> (dashboard session cookie); health at <a href="/api/status">/api/status</a></li>
</ul>
<p>The full dashboard is on its way; everything it will do is already reachable through the API.</p>
</body></html>`;

/** The landing page served at `/` until the SvelteKit dashboard is mounted there. */
export async function homeRoutes(app: FastifyInstance, options: { publicUrl: string }) {
  const html = page(`${options.publicUrl}/mcp`);
  app.get('/', async (_request, reply) => reply.type('text/html; charset=utf-8').send(html));
}
