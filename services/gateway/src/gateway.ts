import type { FastifyInstance } from 'fastify';
import * as grpc from '@grpc/grpc-js';
import type { Bus, Database } from '@portcullis/core';
import type { GatewayConfig } from './config.ts';
import { buildApp, type DashboardHandler } from './app.ts';
import { createAuditClient } from './clients/audit-client.ts';
import { createPolicyClient } from './clients/policy-client.ts';
import { createUpstreamPool } from './clients/upstream-pool.ts';
import { createAuditPublisher } from './modules/audit/audit-publisher.ts';
import { createAuthService } from './modules/auth/auth-service.ts';
import { createMemberKeyResolver } from './modules/identity/member-key-resolver.ts';
import { createSessionRegistry } from './modules/sessions/session-registry.ts';
import { createMailer } from './modules/mail/mailer.ts';
import { createToolCallService } from './mcp/tool-call-service.ts';
import { createCallApprovalService } from './modules/call-approvals/call-approval-service.ts';
import { createConnectFlow } from './modules/connections/connect-flow.ts';
import { createOAuthClientRegistry } from './modules/connections/oauth-client-registry.ts';
import { createOAuthServerDiscovery } from './modules/connections/oauth-server-discovery.ts';
import { createSealedTokens } from './modules/connections/sealed-tokens.ts';
import { createCredentialsService } from './modules/connectors/credentials-service.ts';
import { createEntityStore } from './modules/entities/entity-store.ts';
import { harvestAndStore } from './modules/entities/harvester.ts';
import { createEntityRefresh } from './modules/entities/entity-refresh.ts';
import { createAgentOAuth } from './oauth/agent-oauth.ts';

export interface Gateway {
  /** Where it listens, e.g. `http://127.0.0.1:8080`. */
  url: string;
  app: FastifyInstance;
  /** Stops taking requests, then waits until every audit entry was accepted by the bus. */
  close(): Promise<void>;
}

export interface GatewayDeps {
  db: Database;
  bus: Bus;
  dbPing: () => Promise<void>;
  log?: (line: string) => void;
  now?: () => number;
  /** The built dashboard to serve on the same port (single-process mode). */
  dashboard?: DashboardHandler;
}

/**
 * Wires the gateway's real dependencies into an app that does not listen yet (tests use
 * `app.inject()`); `release()` closes what the wiring opened, after the app is closed.
 */
export async function composeGateway(config: GatewayConfig, deps: GatewayDeps): Promise<{ app: FastifyInstance; release(): Promise<void> }> {
  const log = deps.log ?? ((line: string) => process.stdout.write(line + '\n'));
  const policy = createPolicyClient(config.POLICY_URL, config.POLICY_TIMEOUT_MS);
  const audit = createAuditClient(config.AUDIT_URL);
  const upstream = createUpstreamPool({
    timeoutMs: config.UPSTREAM_TIMEOUT_MS,
    idleMs: config.UPSTREAM_IDLE_SECONDS * 1000,
    maxConcurrentPerSession: config.UPSTREAM_MAX_CONCURRENCY,
    maxSessions: config.UPSTREAM_MAX_SESSIONS,
  });
  const oauthClients = createOAuthClientRegistry({
    db: deps.db, secret: config.secret, credentials: createCredentialsService({ db: deps.db, secret: config.secret }), platformApps: config.platformApps,
  });
  const tokens = createSealedTokens({ db: deps.db, bus: deps.bus, clients: oauthClients, ...(deps.now ? { now: deps.now } : {}) });
  const publisher = createAuditPublisher({ bus: deps.bus, recordDeadlineMs: config.AUDIT_RECORD_TIMEOUT_MS });
  const resolver = createMemberKeyResolver({ db: deps.db, bus: deps.bus });
  const sessions = createSessionRegistry({ db: deps.db, bus: deps.bus, idleMs: config.TOOL_SESSION_IDLE_MINUTES * 60_000, ...(deps.now ? { now: deps.now } : {}) });
  const publicUrlGuess = config.PUBLIC_URL ?? `http://${config.HOST === '0.0.0.0' ? '127.0.0.1' : config.HOST}:${config.PORT}`;
  const mailer = createMailer(config.MAIL_URL!, config.MAIL_FROM, log);
  const approvals = createCallApprovalService({
    db: deps.db, bus: deps.bus, audit: publisher, mailer, publicUrl: publicUrlGuess, secret: config.secret,
    settings: {
      pendingTtlMs: config.APPROVAL_PENDING_TTL_SECONDS * 1000, grantTtlMs: config.APPROVAL_GRANT_TTL_SECONDS * 1000,
      sweepIntervalMs: config.APPROVAL_SWEEP_INTERVAL_MS, mailIntervalMs: 60_000,
      maxPendingPerMember: config.APPROVAL_MAX_PENDING_PER_MEMBER, maxPendingPerAgent: config.APPROVAL_MAX_PENDING_PER_AGENT,
    },
    log: (message, err) => log(`${message}: ${err instanceof Error ? err.message : String(err)}`),
    ...(deps.now ? { now: deps.now } : {}),
  });
  approvals.start();
  const toolCalls = createToolCallService({
    policy, upstream, audit: publisher, upstreamUrls: config.upstreamUrls, tokens, approvals, secret: config.secret, ...(deps.now ? { now: deps.now } : {}),
  });
  const entityStore = createEntityStore(deps.db);
  const connectFlow = createConnectFlow({
    db: deps.db,
    bus: deps.bus,
    secret: config.secret,
    discovery: createOAuthServerDiscovery(deps.now ? { now: deps.now } : {}),
    clients: oauthClients,
    upstreamUrls: config.upstreamUrls,
    redirectUri: `${publicUrlGuess.replace(/\/$/, '')}/api/oauth/callback`,
    dashboardUrl: config.DASHBOARD_URL ?? publicUrlGuess,
    // Harvest the connector's entities with the fresh token, for policy pickers and resource conditions.
    afterConnect: async (c) => {
      await harvestAndStore(entityStore, c, (tool, args) => upstream.callTool({ ...c, url: config.upstreamUrls[c.service]! }, tool, args));
    },
    ...(deps.now ? { now: deps.now } : {}),
  });
  const auth = createAuthService({
    db: deps.db,
    bus: deps.bus,
    mailer,
    secret: config.secret,
    publicUrl: publicUrlGuess,
    sessions: { idleMs: config.SESSION_IDLE_MINUTES * 60_000, maxMs: config.SESSION_MAX_MINUTES * 60_000 },
    mfaPolicy: config.MFA_REQUIRED,
    ...(deps.now ? { now: deps.now } : {}),
  });

  const oauth = createAgentOAuth({ db: deps.db, bus: deps.bus, secret: config.secret, publicUrl: publicUrlGuess, ...(deps.now ? { now: deps.now } : {}) });

  const app = await buildApp({
    oauth,
    config: { ...config, publicUrl: publicUrlGuess },
    db: deps.db,
    bus: deps.bus,
    resolver,
    toolCalls,
    approvals,
    sessions,
    auth,
    audit,
    policy,
    mailer,
    secret: config.secret,
    connectFlow,
    entityRefresh: createEntityRefresh({ resolver, tokens, upstream, store: entityStore, upstreamUrls: config.upstreamUrls }),
    ...(deps.now ? { now: deps.now } : {}),
    ...(deps.dashboard ? { dashboard: deps.dashboard } : {}),
    probes: {
      database: deps.dbPing,
      bus: () => deps.bus.ping(),
      // Any answer from the PDP, even a refusal of the probe's empty request, means it is up.
      policy: () => policy.authorize({ agentId: '00000000-0000-0000-0000-000000000000', member: { id: '00000000-0000-0000-0000-000000000000', role: 'member', status: 'approved', email: '' }, service: 'github', tool: 'get_me', toolArgsJson: '{}', sessionId: '', policyVersion: 0, nowMs: 0 })
        .then(() => undefined, (err: { code?: number }) => {
          if (err.code === grpc.status.UNAVAILABLE || err.code === grpc.status.DEADLINE_EXCEEDED) throw err;
        }),
      audit: () => audit.stats({ agentIds: [], from: '', to: '' }).then(() => undefined),
    },
  });
  return {
    app,
    async release() {
      approvals.close();
      await publisher.flush();
      await resolver.close();
      await oauth.tokens.close();
      await sessions.close();
      await upstream.close();
      policy.close();
      audit.close();
    },
  };
}

/** Wires the gateway and listens on `PORT`/`HOST`. */
export async function startGateway(config: GatewayConfig, deps: GatewayDeps): Promise<Gateway> {
  const { app, release } = await composeGateway(config, deps);
  const address = await app.listen({ port: config.PORT, host: config.HOST });
  const url = config.PUBLIC_URL ?? address.replace('[::1]', 'localhost');
  return {
    url,
    app,
    async close() {
      await app.close();
      await release();
    },
  };
}
