import { bindServer, type Bus, type Database } from '@portcullis/core';
import type { PolicyConfig } from './config.ts';
import { createPolicyCache } from './engine/policy-cache.ts';
import { createAuthorizeHandler } from './handlers/authorize.ts';
import { createPreviewHandler } from './handlers/preview.ts';
import { createSimulateHandler } from './handlers/simulate.ts';
import { createPolicyServer } from './server.ts';
import { createPolicyRepo } from './store/policy-repo.ts';

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
 * read from `deps.db`, cache invalidation from `deps.bus`. The caller owns db and bus.
 */
export async function startPolicyService(config: Pick<PolicyConfig, 'GRPC_ADDRESS'>, deps: { db: Database; bus: Pick<Bus, 'onChange'> }): Promise<PolicyService> {
  const cache = createPolicyCache({ repo: createPolicyRepo(deps.db) });
  const unsubscribe = deps.bus.onChange((event) => cache.handleChange(event));
  const server = createPolicyServer({
    Authorize: createAuthorizeHandler({ cache }),
    Preview: createPreviewHandler(),
    Simulate: createSimulateHandler(),
  });
  let address: string;
  try {
    address = await bindServer(server, config.GRPC_ADDRESS);
  } catch (err) {
    unsubscribe();
    cache.close();
    server.forceShutdown();
    throw err;
  }

  let closing: Promise<void> | undefined;
  return {
    address,
    close() {
      closing ??= (async () => {
        unsubscribe();
        await new Promise<void>((resolve) => {
          const timer = setTimeout(() => { server.forceShutdown(); resolve(); }, SHUTDOWN_GRACE_MS);
          server.tryShutdown(() => { clearTimeout(timer); resolve(); });
        });
        cache.close();
      })();
      return closing;
    },
  };
}
