import type * as grpc from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';

/**
 * The standard `grpc.health.v1.Health` service on `server`, for load balancers and
 * orchestrators: `NOT_SERVING` until the service is ready, `SERVING` while it takes calls,
 * `NOT_SERVING` again from the moment it starts shutting down. Reported for the whole server
 * (`""`) and for `serviceName` (e.g. `portcullis.policy.v1.PolicyDecision`).
 */
export function addHealthService(server: grpc.Server, serviceName: string): { serving(): void; notServing(): void } {
  const health = new HealthImplementation({ '': 'NOT_SERVING', [serviceName]: 'NOT_SERVING' });
  health.addToServer(server as never);
  const set = (status: 'SERVING' | 'NOT_SERVING') => {
    health.setStatus('', status);
    health.setStatus(serviceName, status);
  };
  return { serving: () => set('SERVING'), notServing: () => set('NOT_SERVING') };
}
