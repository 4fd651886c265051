import { addHealthService, bindServer, type Bus, type Database } from '@portcullis/core';
import { createAuditEntrySource } from './clients/audit-entries.ts';
import type { PolicyConfig } from './config.ts';
import { createPolicyCache } from './engine/policy-cache.ts';
import { sharedSessionJudge } from './engine/session-counters.ts';
import { createAuthorizeDecider, createAuthorizeHandler } from './handlers/authorize.ts';
import { createAuthorizeStreamHandler } from './handlers/authorize-stream.ts';
import { createPreviewHandler } from './handlers/preview.ts';
import { createSimulateHandler } from './handlers/simulate.ts';
import { createPolicyServer } from './server.ts';
import { createPolicyRepo } from './store/policy-repo.ts';
import { createSimulationRepo } from './store/simulation-repo.ts';

/** A running decision point. */
export interface PolicyService {
  /** The bound gRPC address (`host:port`), the real port when 0 was asked for. */
  address: string;
  /** Stops taking calls, lets calls in flight finish (up to 5 s), frees the cached sets. */
  close(): Promise<void>;
}

const SHUTDOWN_GRACE_MS = 5_000;

/**
 * Starts the policy decision point: gRPC `PolicyDecision` on `config.GRPC_ADDRESS`, policies
 * read from `deps.db`, cache invalidation from `deps.bus`, past calls for Simulate from the
 * audit service at `config.AUDIT_URL` (connected on first use). The caller owns db and bus.
 */
/** A session's counters are forgotten once it made no limited call for a week (tool sessions expire long before). */
const SESSION_COUNTERS_TTL_MS = 7 * 24 * 60 * 60_000;

export async function startPolicyService(config: Pick<PolicyConfig, 'GRPC_ADDRESS'> & Partial<Pick<PolicyConfig, 'AUDIT_URL' | 'POLICY_CLOCK_OFFSET_MS'>>, deps: { db: Database; bus: Pick<Bus, 'onChange' | 'keyValue'> }): Promise<PolicyService> {
  const repo = createPolicyRepo(deps.db);
  const cache = createPolicyCache({ repo });
  // Simulate's reads of past calls; without AUDIT_URL it answers UNAVAILABLE.
  const audit = config.AUDIT_URL ? createAuditEntrySource(config.AUDIT_URL) : undefined;
  // Session-limit counters shared by every decision point (JetStream KV; a map in-process).
  const counters = sharedSessionJudge(await deps.bus.keyValue('SESSION_COUNTERS', { ttlMs: SESSION_COUNTERS_TTL_MS }));
  const unsubscribe = deps.bus.onChange((event) => {
    if (event.kind === 'session.ended') void counters.forget(event.sessionId).catch(() => undefined);
    else cache.handleChange(event);
  });
  const authorizeDeps = { cache, counters, clockOffsetMs: config.POLICY_CLOCK_OFFSET_MS ?? 0 };
  const authorizeStream = createAuthorizeStreamHandler(createAuthorizeDecider(authorizeDeps));
  const server = createPolicyServer({
    Authorize: createAuthorizeHandler(authorizeDeps),
    AuthorizeStream: authorizeStream.handler,
    Preview: createPreviewHandler(),
    Simulate: createSimulateHandler({ policies: repo, store: createSimulationRepo(deps.db), audit }),
  });
  const health = addHealthService(server, 'portcullis.policy.v1.PolicyDecision');
  let address: string;
  try {
    address = await bindServer(server, config.GRPC_ADDRESS);
    health.serving();
  } catch (err) {
    unsubscribe();
    cache.close();
    audit?.close();
    server.forceShutdown();
    throw err;
  }

  let closing: Promise<void> | undefined;
  return {
    address,
    close() {
      closing ??= (async () => {
        health.notServing();
        unsubscribe();
        await new Promise<void>((resolve) => {
          const timer = setTimeout(() => { server.forceShutdown(); resolve(); }, SHUTDOWN_GRACE_MS);
          server.tryShutdown(() => { clearTimeout(timer); resolve(); });
          // Long-lived Authorize streams would hold the shutdown open: each ends once answered.
          authorizeStream.drain();
        });
        cache.close();
        audit?.close();
      })();
      return closing;
    },
  };
}
