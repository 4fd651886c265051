import Fastify, { LogController, type FastifyError, type FastifyInstance, type FastifyReply } from 'fastify';
import cookie from '@fastify/cookie';
import swagger from '@fastify/swagger';
import { jsonSchemaTransform, serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import * as grpc from '@grpc/grpc-js';
import { ApiError, type Bus, type Database } from '@portcullis/core';
import type { GatewayConfig } from './config.ts';
import type { AuditClient } from './clients/audit-client.ts';
import type { PolicyClient } from './clients/policy-client.ts';
import type { MemberKeyResolver } from './modules/identity/member-key-resolver.ts';
import type { AuthService } from './modules/auth/auth-service.ts';
import type { ToolCallService } from './mcp/tool-call-service.ts';
import type { ConnectFlow } from './modules/connections/connect-flow.ts';
import type { EntityRefresh } from './modules/entities/entity-refresh.ts';
import type { SessionRegistry } from './modules/sessions/session-registry.ts';
import { mcpRoutes } from './mcp/mcp-route.ts';
import { createMcpQuota, type McpQuotaLimits } from './mcp/call-quota.ts';
import { createWorkGate, type WorkGates } from './plugins/work-gates.ts';
import { authRoutes } from './api/auth-router.ts';
import { accountRoutes } from './api/account-router.ts';
import { abuseRateLimitsOf, authRateLimitsOf, type RateLimitConfig } from './plugins/rate-limits.ts';
import { auditRoutes } from './api/audit-router.ts';
import { auditStreamRoutes } from './api/audit-stream-router.ts';
import { dashboardRoutes } from './api/dashboard-router.ts';
import { sessionsRoutes } from './api/sessions-router.ts';
import { setupRoutes } from './api/setup-router.ts';
import { agentsRoutes } from './api/agents-router.ts';
import { policiesRoutes } from './api/policies-router.ts';
import { membersRoutes } from './api/members-router.ts';
import { connectorsRoutes } from './api/connectors-router.ts';
import { connectionsRoutes } from './api/connections-router.ts';
import { entitiesRoutes } from './api/entities-router.ts';
import { webhooksRoutes } from './api/webhooks-router.ts';
import { sinksRoutes } from './api/sinks-router.ts';
import { callApprovalsRoutes } from './api/call-approvals-router.ts';
import type { CallApprovalService } from './modules/call-approvals/call-approval-service.ts';
import type { Mailer } from './modules/mail/mailer.ts';
import { statusRoutes, type HealthProbe } from './api/status-router.ts';
import { homeRoutes } from './api/home-router.ts';
import { requireUser, sameOriginGuard } from './plugins/session-auth.ts';
import { metricsRoutes } from './api/metrics-router.ts';
import { createSessionEnds } from './modules/auth/session-ends.ts';
import { refuseControlCharacters } from './plugins/text-input-guard.ts';
import { validationApiError } from './api/validation.ts';
import { oauthServerRoutes, oauthRateLimitsOf } from './oauth/oauth-routes.ts';
import { oauthConsentRoutes } from './oauth/consent-routes.ts';
import type { AgentOAuth } from './oauth/agent-oauth.ts';
import { oauthUrlsOf } from './oauth/oauth-provider.ts';

export interface AppDeps {
  config: Pick<GatewayConfig, 'NODE_ENV' | 'METRICS_TOKEN' | 'HOST' | 'MCP_ALLOWED_ORIGINS' | 'MCP_BODY_LIMIT_BYTES' | 'API_BODY_LIMIT_BYTES' | 'SESSION_IDLE_MINUTES' | 'SESSION_MAX_MINUTES' | 'TRUST_PROXY' | 'LOG_LEVEL' | 'AUDIT_STREAM_HEARTBEAT_MS' | 'AUDIT_STREAM_MAX_PER_USER' | 'AUDIT_STREAM_QUEUE_LIMIT' | 'SINK_ALLOWED_HOSTS'> & RateLimitConfig & QuotaConfig & { publicUrl: string };
  db: Database;
  bus: Bus;
  resolver: MemberKeyResolver;
  toolCalls: ToolCallService;
  /** Call approvals (decision 063): the owners' routes and live stream. */
  approvals: CallApprovalService;
  /** Tool (MCP) sessions shared by every replica. */
  sessions: SessionRegistry;
  auth: AuthService;
  audit: AuditClient;
  /** The PDP, for policy preview and simulate (verdicts go through `toolCalls`). */
  policy: Pick<PolicyClient, 'preview' | 'simulate'>;
  /** Sends invite e-mails (the same mailer as sign-in). */
  mailer: Mailer;
  /** The server secret (`PORTCULLIS_SECRET`); invite tokens are signed under a key derived from it. */
  secret: string;
  probes: Record<string, HealthProbe>;
  /** On-demand entity harvests with a member's own connection. */
  entityRefresh: EntityRefresh;
  /** Members' OAuth connect flow (connect and callback). */
  connectFlow: ConnectFlow;
  /** Injected clock for tests; `Date.now` otherwise. */
  now?: () => number;
  /** Portcullis as the OAuth authorization server of its own `/mcp` (decisions 050–054). */
  oauth: AgentOAuth;
  /**
   * The built dashboard (SvelteKit adapter-node `handler`), served for every `GET` that is not
   * `/api` or `/mcp` — single-process mode serves everything on one port. Absent: a landing page.
   */
  dashboard?: DashboardHandler;
}

export type QuotaConfig = Pick<GatewayConfig,
  'MCP_RATE_PER_KEY' | 'MCP_RATE_BURST_PER_KEY' | 'MCP_RATE_PER_AGENT' | 'MCP_RATE_BURST_PER_AGENT' | 'MCP_AUTH_FAILURES_PER_IP_PER_MINUTE' | 'MCP_RATE_PENALTY_MS'
  | 'AUDIT_READS_AT_ONCE' | 'AUDIT_READS_PER_USER' | 'AUDIT_READS_PER_AGENT' | 'EXPORTS_AT_ONCE' | 'EXPORTS_PER_USER' | 'EXPORTS_PER_AGENT'
  | 'SIMULATIONS_AT_ONCE' | 'SIMULATIONS_PER_USER' | 'SIMULATIONS_PER_AGENT' | 'WORK_QUEUE_PER_USER' | 'WORK_MAX_WAIT_MS'>;

/** Turns for the API's heavy work, from configuration (decision 069); one set per replica. */
export function workGatesOf(config: QuotaConfig): WorkGates {
  const queue = { queuePerUser: config.WORK_QUEUE_PER_USER, maxWaitMs: config.WORK_MAX_WAIT_MS };
  return {
    reads: createWorkGate('audit reads', { slots: config.AUDIT_READS_AT_ONCE, perUser: config.AUDIT_READS_PER_USER, perAgent: config.AUDIT_READS_PER_AGENT, ...queue }),
    exports: createWorkGate('exports', { slots: config.EXPORTS_AT_ONCE, perUser: config.EXPORTS_PER_USER, perAgent: config.EXPORTS_PER_AGENT, ...queue }),
    simulations: createWorkGate('simulations', { slots: config.SIMULATIONS_AT_ONCE, perUser: config.SIMULATIONS_PER_USER, perAgent: config.SIMULATIONS_PER_AGENT, ...queue }),
  };
}

/** `/mcp`'s quotas from configuration (decision 069). */
export function mcpQuotaLimitsOf(config: QuotaConfig): McpQuotaLimits {
  return {
    perKey: { perSecond: config.MCP_RATE_PER_KEY, burst: config.MCP_RATE_BURST_PER_KEY },
    perAgent: { perSecond: config.MCP_RATE_PER_AGENT, burst: config.MCP_RATE_BURST_PER_AGENT },
    authFailuresPerIp: { perSecond: config.MCP_AUTH_FAILURES_PER_IP_PER_MINUTE / 60, burst: config.MCP_AUTH_FAILURES_PER_IP_PER_MINUTE },
    penaltyMs: config.MCP_RATE_PENALTY_MS,
  };
}

/** A Node request handler, as SvelteKit's adapter-node exports it. */
export type DashboardHandler = (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse, next?: () => void) => void;

/** Maps a gRPC failure from an internal service to the REST error it means for the caller. */
function apiErrorOfGrpc(err: grpc.ServiceError): ApiError {
  if (err.code === grpc.status.INVALID_ARGUMENT) return new ApiError('invalid_request', err.details || 'Invalid request');
  return new ApiError('unavailable', 'A backing service is unavailable; try again shortly.');
}

/** Builds the gateway without listening: `/mcp` and `/api`. Tests use `app.inject()`. */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    logger: deps.config.LOG_LEVEL === 'silent' ? false : {
      level: deps.config.LOG_LEVEL,
      redact: { paths: ['req.headers.authorization', 'req.headers.cookie', 'res.headers["set-cookie"]'], censor: '[REDACTED]' },
    },
    trustProxy: deps.config.TRUST_PROXY,
    bodyLimit: deps.config.API_BODY_LIMIT_BYTES,
    genReqId: () => crypto.randomUUID(),
    // Router-level faults (a malformed URL, an over-long path parameter) in our error shape too.
    frameworkErrors: (error, request, reply) => {
      const body = new ApiError('invalid_request', error.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'A path parameter is too long.' : 'The URL is malformed.').toBody(request.id);
      void (reply as FastifyReply).code(400).send(body);
    },
    logController: new LogController({ disableRequestLogging: true }),
  });

  app.setErrorHandler((error: FastifyError | ApiError | grpc.ServiceError, request, reply) => {
    let apiError: ApiError;
    const invalid = validationApiError(error as FastifyError);
    if (error instanceof ApiError) apiError = error;
    else if (invalid) apiError = invalid;
    else if ('code' in error && typeof error.code === 'number' && 'details' in error) apiError = apiErrorOfGrpc(error as grpc.ServiceError);
    else if ((error as FastifyError).statusCode === 413) apiError = new ApiError('payload_too_large', 'The request body is too large.');
    else if ((error as FastifyError).code === 'FST_ERR_CTP_INVALID_JSON' || (error as FastifyError).code === 'FST_ERR_CTP_EMPTY_JSON_BODY') apiError = new ApiError('invalid_request', 'The body is not valid JSON.');
    else if ((error as FastifyError).code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') apiError = new ApiError('invalid_request', 'Send the body as application/json.');
    else if ((error as FastifyError).statusCode && (error as FastifyError).statusCode! < 500) apiError = new ApiError('invalid_request', 'The request is malformed.');
    else {
      request.log.error({ err: error }, 'unhandled error');
      return reply.code(500).send({ error: { code: 'internal', message: 'Something went wrong on our side.', requestId: request.id } });
    }
    if (request.url.startsWith('/mcp')) {
      return reply.code(apiError.status).send({ jsonrpc: '2.0', error: { code: -32600, message: apiError.message }, id: null });
    }
    return reply.code(apiError.status).send(apiError.toBody(request.id));
  });

  app.setNotFoundHandler((request, reply) => reply.code(404).send(new ApiError('not_found', `No route for ${request.method} ${request.url.split('?')[0]}`).toBody(request.id)));

  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  await app.register(swagger, {
    openapi: {
      info: {
        title: 'Portcullis API', version: '0.1.0',
        description: 'REST API of the Portcullis gateway (dashboard session cookie). A request that changes state (any method but GET, HEAD, '
          + 'OPTIONS) and carries the session cookie must send an `Origin` header (or, without it, `Referer`) equal to the public origin '
          + '(`PUBLIC_URL`; outside production a loopback origin also passes), else it is refused with 403 `forbidden`: scripts that '
          + 'reuse the cookie send `Origin: <PUBLIC_URL>` themselves (decision 068).',
      },
      components: { securitySchemes: { session: { type: 'apiKey', in: 'cookie', name: 'portcullis_session' } } },
      security: [{ session: [] }],
    },
    transform: jsonSchemaTransform,
    hideUntagged: false,
  });

  // Prometheus scrape endpoint: aggregate counts and latencies only (no ids, no secrets); behind METRICS_TOKEN (decision 068).
  await metricsRoutes(app, { token: deps.config.METRICS_TOKEN, production: deps.config.NODE_ENV === 'production' });

  await app.register(async (mcp) => {
    await mcpRoutes(mcp, {
      resolver: deps.resolver,
      agentTokens: deps.oauth.tokens,
      resourceMetadataUrl: deps.oauth.urls.resourceMetadata,
      toolCalls: deps.toolCalls,
      sessions: deps.sessions,
      bodyLimit: deps.config.MCP_BODY_LIMIT_BYTES,
      quota: createMcpQuota(mcpQuotaLimitsOf(deps.config)),
      origins: {
        publicUrl: deps.config.publicUrl,
        allowedOrigins: deps.config.MCP_ALLOWED_ORIGINS,
        allowLoopbackOrigins: deps.config.NODE_ENV !== 'production',
        listenHost: deps.config.HOST,
      },
    });
  });

  await app.register(async (oauth) => {
    await oauthServerRoutes(oauth, { db: deps.db, provider: deps.oauth.provider, publicUrl: deps.config.publicUrl, limits: oauthRateLimitsOf(deps.config) });
  });

  await app.register(async (api) => {
    // Cookies are the dashboard's: `/mcp` (Bearer keys) never parses them.
    await api.register(cookie);
    // Live streams end the moment their dashboard session does, whichever replica ended it (decision 068).
    const sessionEnds = createSessionEnds(deps.bus);
    api.addHook('onClose', async () => { sessionEnds.close(); });
    api.addHook('onRequest', sameOriginGuard({ publicUrl: deps.config.publicUrl, allowLoopbackOrigins: deps.config.NODE_ENV !== 'production' }));
    api.addHook('preValidation', refuseControlCharacters);
    await authRoutes(api, { auth: deps.auth, secureCookies: deps.config.publicUrl.startsWith('https:'), sessionMaxMs: deps.config.SESSION_MAX_MINUTES * 60_000, rateLimits: authRateLimitsOf(deps.config) });
    await accountRoutes(api, { auth: deps.auth });
    const gates = workGatesOf(deps.config);
    await auditRoutes(api, { db: deps.db, auth: deps.auth, audit: deps.audit, gates });
    await auditStreamRoutes(api, {
      db: deps.db, bus: deps.bus, auth: deps.auth, tickMs: deps.config.AUDIT_STREAM_HEARTBEAT_MS,
      maxStreamsPerUser: deps.config.AUDIT_STREAM_MAX_PER_USER, queueLimit: deps.config.AUDIT_STREAM_QUEUE_LIMIT, sessionEnds,
    });
    await dashboardRoutes(api, { db: deps.db, auth: deps.auth, audit: deps.audit, gates });
    await sessionsRoutes(api, { db: deps.db, auth: deps.auth, audit: deps.audit, sessions: deps.sessions });
    await setupRoutes(api, { db: deps.db, auth: deps.auth, publicUrl: deps.config.publicUrl });
    await agentsRoutes(api, { db: deps.db, bus: deps.bus, auth: deps.auth, limits: abuseRateLimitsOf(deps.config) });
    await policiesRoutes(api, { db: deps.db, bus: deps.bus, auth: deps.auth, policy: deps.policy, audit: deps.audit, gates });
    await membersRoutes(api, { db: deps.db, bus: deps.bus, auth: deps.auth, mailer: deps.mailer, secret: deps.secret, publicUrl: deps.config.publicUrl, limits: abuseRateLimitsOf(deps.config) });
    await connectorsRoutes(api, { db: deps.db, auth: deps.auth, secret: deps.secret });
    await callApprovalsRoutes(api, {
      db: deps.db, auth: deps.auth, approvals: deps.approvals, tickMs: deps.config.AUDIT_STREAM_HEARTBEAT_MS,
      maxStreamsPerUser: deps.config.AUDIT_STREAM_MAX_PER_USER, queueLimit: deps.config.AUDIT_STREAM_QUEUE_LIMIT, sessionEnds,
    });
    await sinksRoutes(api, {
      db: deps.db, bus: deps.bus, auth: deps.auth, secret: deps.secret, limits: abuseRateLimitsOf(deps.config),
      destinations: { production: deps.config.NODE_ENV === 'production', allowed: deps.config.SINK_ALLOWED_HOSTS },
    });
    await connectionsRoutes(api, { db: deps.db, bus: deps.bus, auth: deps.auth, connectFlow: deps.connectFlow });
    await entitiesRoutes(api, { db: deps.db, auth: deps.auth, refresh: deps.entityRefresh });
    await api.register(webhooksRoutes, { db: deps.db, secret: deps.secret, ...(deps.now ? { now: deps.now } : {}) });
    await oauthConsentRoutes(api, { db: deps.db, auth: deps.auth, grants: deps.oauth.grants, secret: deps.secret, issuer: oauthUrlsOf(deps.config.publicUrl).issuer, ...(deps.now ? { now: deps.now } : {}) });
    await statusRoutes(api, { probes: deps.probes });
    if (deps.dashboard) {
      const dashboard = deps.dashboard;
      // Every GET no other route answers: the dashboard's pages and assets (its client router
      // takes over from there). Unknown /api and /mcp paths keep their JSON 404.
      api.get('/*', { schema: { hide: true } }, async (request, reply) => {
        if (/^\/(api|mcp)(\/|$|\?)/.test(request.url)) {
          return reply.code(404).send(new ApiError('not_found', `No route for GET ${request.url.split('?')[0]}`).toBody(request.id));
        }
        reply.hijack();
        dashboard(request.raw, reply.raw, () => {
          reply.raw.statusCode = 404;
          reply.raw.end('Not found');
        });
      });
    } else {
      await homeRoutes(api, { publicUrl: deps.config.publicUrl });
    }
    // The API's map is for signed-in users in production, public elsewhere (decision 068).
    api.get('/api/openapi.json', { schema: { hide: true }, ...(deps.config.NODE_ENV === 'production' ? { onRequest: requireUser(deps.auth) } : {}) }, async () => app.swagger());
  });

  return app;
}
