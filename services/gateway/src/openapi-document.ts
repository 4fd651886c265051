import { buildApp, type AppDeps } from './app.ts';
import { loadGatewayConfig } from './config.ts';
import { oauthUrlsOf } from './oauth/oauth-provider.ts';

/**
 * Stands in for every dependency while the routes are only registered: registering a route
 * reads its schemas, never its services. Any property is another stand-in, any call answers
 * one, and it is not a promise (`then` is absent), so nothing waits on it.
 */
const inert: unknown = new Proxy(function inertDependency() {}, {
  get: (_target, property) => (property === 'then' ? undefined : inert),
  apply: () => inert,
});

/**
 * The gateway's OpenAPI document (`GET /api/openapi.json`), built in-process from the routes'
 * own schemas without a database, bus or backing service. The dashboard's API types are
 * generated from it (`npm run api:types`).
 */
export async function openApiDocument(): Promise<Record<string, unknown>> {
  const secret = 'openapi-document-only-never-a-real-secret';
  const config = loadGatewayConfig({ NODE_ENV: 'test', LOG_LEVEL: 'silent', PUBLIC_URL: 'http://localhost', MAIL_URL: 'log' }, secret);
  const stand = inert as never;
  const deps: AppDeps = {
    config: { ...config, publicUrl: 'http://localhost' },
    db: stand, bus: stand, resolver: stand, toolCalls: stand, approvals: stand, sessions: stand, auth: stand, audit: stand, policy: stand,
    mailer: stand, secret, probes: {}, entityRefresh: stand, connectFlow: stand,
    oauth: { provider: stand, grants: stand, tokens: stand, urls: oauthUrlsOf('http://localhost') },
  };
  const app = await buildApp(deps);
  try {
    await app.ready();
    return app.swagger() as unknown as Record<string, unknown>;
  } finally {
    await app.close();
  }
}
