import express, { type NextFunction, type Request, type Response } from 'express';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { authorizationHandler } from '@modelcontextprotocol/sdk/server/auth/handlers/authorize.js';
import { clientRegistrationHandler } from '@modelcontextprotocol/sdk/server/auth/handlers/register.js';
import { revocationHandler } from '@modelcontextprotocol/sdk/server/auth/handlers/revoke.js';
import { tokenHandler } from '@modelcontextprotocol/sdk/server/auth/handlers/token.js';
import type { OAuthServerProvider } from '@modelcontextprotocol/sdk/server/auth/provider.js';
import { OAuthError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import { ApiError, type Database } from '@portcullis/core';
import { clientIpKey, createLimiters, createSharedLimiters, type Limit, type LimitHook, type RateLimitConfig } from '../plugins/rate-limits.ts';
import { oauthUrlsOf } from './oauth-provider.ts';
import { isLoopbackHttp, withIssuer } from './redirect-uris.ts';

export interface OAuthRateLimits {
  /** `POST /oauth/register`, per client IP, counted in Postgres (every replica shares it). */
  registerPerIp: Limit;
  /** `POST /oauth/token` and `/oauth/revoke`, per client IP, per replica. */
  tokenPerIp: Limit;
}

/** The limits from configuration. */
export function oauthRateLimitsOf(config: RateLimitConfig): OAuthRateLimits {
  return {
    registerPerIp: { max: config.RATE_LIMIT_OAUTH_REGISTER_PER_IP, windowMs: 60 * 60_000 },
    tokenPerIp: { max: config.RATE_LIMIT_OAUTH_TOKEN_PER_IP, windowMs: config.RATE_LIMIT_WINDOW_MINUTES * 60_000 },
  };
}

/** An OAuth error body (RFC 6749 §5.2), the shape every answer of these endpoints has. */
function oauthError(reply: FastifyReply, status: number, error: string, description: string) {
  return reply.code(status).header('cache-control', 'no-store').type('application/json').send({ error, error_description: description });
}

/** A limiter hook whose refusal is an OAuth error (429 `too_many_requests`, with Retry-After). */
function oauthLimited(limit: LimitHook): LimitHook {
  return async (request, reply) => {
    if (request.method === 'OPTIONS') return; // a CORS preflight is not a request
    try {
      await limit(request, reply);
    } catch (err) {
      if (err instanceof ApiError && err.code === 'rate_limited') return oauthError(reply, 429, 'too_many_requests', err.message);
      throw err;
    }
  };
}

/**
 * RFC 9700 §4.11.2: the authorization server must not be an open redirector. Any client can
 * register itself, so its https redirect URI is not trusted: an authorization request the
 * SDK's handler refuses is answered here (400, OAuth error body) instead of bouncing the
 * browser there unasked. The consent page (ours) and loopback redirects (the member's own
 * machine) are still redirected to; after consent, the member has seen the host (decision 051).
 */
function noUntrustedRedirects(urls: { consentPage: string; issuer: string }) {
  return (_req: Request, res: Response, next: NextFunction) => {
    const redirect = res.redirect.bind(res) as (status: number, url: string) => void;
    res.redirect = ((status: number | string, url?: string) => {
      const target = typeof status === 'string' ? status : url!;
      const code = typeof status === 'number' ? status : 302;
      if (target.startsWith(`${urls.consentPage}?`)) return redirect(code, target);
      if (isLoopbackHttp(target)) return redirect(code, withIssuer(target, urls.issuer));
      const params = new URL(target).searchParams;
      res.status(400).set('cache-control', 'no-store').json({
        error: params.get('error') ?? 'invalid_request', error_description: params.get('error_description') ?? 'The authorization request is not valid.',
      });
    }) as Response['redirect'];
    next();
  };
}

/**
 * What is logged of an unexpected failure: its kind and first message line and those of its
 * cause — not the whole error, whose text can carry a failed query's parameters (digests,
 * wrapped vault keys).
 */
function failureOf(err: unknown): Record<string, unknown> {
  const line = (e: unknown) => (e instanceof Error ? (e.message.split('\n')[0] ?? '') : String(e)).slice(0, 500);
  const cause = err instanceof Error ? err.cause : undefined;
  return {
    type: err instanceof Error ? err.name : typeof err,
    message: line(err),
    ...(cause !== undefined ? { cause: line(cause), ...(typeof (cause as { code?: unknown }).code === 'string' ? { code: (cause as { code: string }).code } : {}) } : {}),
    ...(err instanceof Error && err.stack ? { stack: err.stack.split('\n').slice(1, 6).join('\n') } : {}),
  };
}

/**
 * `target` with every method (and those of its `clientsStore`) reporting a failure that is not
 * an OAuth error to `log` before it propagates: the SDK's handlers turn such a failure into a
 * bare 500 `server_error` and log nothing, so the cause would be lost.
 */
function reportingUnexpected<T extends object>(target: T, log: (err: unknown, operation: string) => void): T {
  return new Proxy(target, {
    get(object, property, receiver) {
      const value: unknown = Reflect.get(object, property, receiver);
      if (property === 'clientsStore' && value !== null && (typeof value === 'object' || typeof value === 'function')) return reportingUnexpected(value, log);
      if (typeof value !== 'function') return value;
      const report = (err: unknown) => {
        if (!(err instanceof OAuthError)) log(err, String(property));
        throw err;
      };
      return (...args: unknown[]) => {
        try {
          const result: unknown = value.apply(object, args);
          return result instanceof Promise ? result.catch(report) : result;
        } catch (err) {
          return report(err);
        }
      };
    },
  });
}

/**
 * Portcullis as the authorization server of its own `/mcp` (decisions 050–053): RFC 9728
 * protected-resource metadata, RFC 8414 authorization-server metadata, and the MCP SDK's
 * authorization, token, registration (RFC 7591) and revocation (RFC 7009) handlers. Those are
 * Express routers: each request is handed to them untouched (Fastify does not read the body),
 * after this replica's rate limits. Every answer, errors included, is in the OAuth format.
 */
export async function oauthServerRoutes(app: FastifyInstance, options: {
  db: Database; provider: OAuthServerProvider; publicUrl: string; limits: OAuthRateLimits;
}) {
  const urls = oauthUrlsOf(options.publicUrl);
  const provider = reportingUnexpected(options.provider, (err, operation) => app.log.error({ err: failureOf(err) }, `oauth: ${operation} failed`));

  const handlers = express();
  handlers.disable('x-powered-by');
  handlers.use('/oauth/authorize', noUntrustedRedirects(urls));
  handlers.use('/oauth/authorize', authorizationHandler({ provider, rateLimit: false }));
  handlers.use('/oauth/token', tokenHandler({ provider, rateLimit: false }));
  handlers.use('/oauth/register', clientRegistrationHandler({ clientsStore: provider.clientsStore, rateLimit: false, clientSecretExpirySeconds: 0 }));
  handlers.use('/oauth/revoke', revocationHandler({ provider, rateLimit: false }));
  // A body the parsers refuse (malformed, too large) — never Express's HTML page or a stack trace.
  handlers.use((err: { status?: number; type?: string }, _req: Request, res: Response, _next: NextFunction) => {
    const tooLarge = err.status === 413 || err.type === 'entity.too.large';
    res.status(tooLarge ? 413 : 400).set('cache-control', 'no-store')
      .json({ error: 'invalid_request', error_description: tooLarge ? 'The request body is too large.' : 'The request body is malformed.' });
  });

  const handOver = async (request: FastifyRequest, reply: FastifyReply) => {
    reply.hijack();
    // The SDK answers its own 500s; they are logged here, with the request id (Fastify's error handler never sees them).
    // (The path is read now: Express rewrites the raw request's URL as it routes.)
    const path = request.url.split('?')[0];
    reply.raw.once('finish', () => {
      if (reply.raw.statusCode >= 500) request.log.error({ statusCode: reply.raw.statusCode, method: request.method, path }, 'oauth: answered with a server error');
    });
    handlers(request.raw as Request, reply.raw as Response);
  };

  const limiter = await createLimiters(app);
  const shared = createSharedLimiters({ db: options.db });
  const tokenLimit = oauthLimited(limiter(options.limits.tokenPerIp, 'token requests', clientIpKey));
  const registerLimit = oauthLimited(shared({ limit: options.limits.registerPerIp, action: 'oauth.register', what: 'client registrations', subjectOf: (r) => `ip:${clientIpKey(r)}` }));

  // The SDK's parsers read the body; Fastify leaves the stream alone.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined));

  const cors = { 'access-control-allow-origin': '*', 'cache-control': 'public, max-age=300' };
  const protectedResource = { resource: urls.resource, authorization_servers: [urls.issuer], bearer_methods_supported: ['header'], resource_name: 'Portcullis MCP gateway' };
  const authorizationServer = {
    issuer: urls.issuer,
    authorization_endpoint: urls.authorize,
    token_endpoint: urls.token,
    registration_endpoint: urls.register,
    revocation_endpoint: urls.revoke,
    response_types_supported: ['code'],
    grant_types_supported: ['authorization_code', 'refresh_token'],
    code_challenge_methods_supported: ['S256'],
    token_endpoint_auth_methods_supported: ['none'],
    revocation_endpoint_auth_methods_supported: ['none'],
    authorization_response_iss_parameter_supported: true,
  };
  for (const url of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp']) {
    app.get(url, { schema: { hide: true } }, async (_request, reply) => reply.headers(cors).send(protectedResource));
  }
  app.get('/.well-known/oauth-authorization-server', { schema: { hide: true } }, async (_request, reply) => reply.headers(cors).send(authorizationServer));

  // Every method is handed over: the SDK answers one an endpoint does not take with a 405 OAuth error.
  app.all('/oauth/authorize', { schema: { hide: true } }, handOver);
  app.all('/oauth/token', { schema: { hide: true }, onRequest: tokenLimit }, handOver);
  app.all('/oauth/revoke', { schema: { hide: true }, onRequest: tokenLimit }, handOver);
  app.all('/oauth/register', { schema: { hide: true }, onRequest: registerLimit }, handOver);
}
