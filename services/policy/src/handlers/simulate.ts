import type * as grpc from '@grpc/grpc-js';
import { simulate, type SimulateInput, type SimulationDeps, type SimulationResult } from '../simulation/simulate.ts';
import { toGrpcError } from './grpc-status.ts';

/** `SimulateRequest` as proto-loader delivers it. */
export type SimulateRequest = SimulateInput;
/** `SimulateResponse`. */
export type SimulateResponse = SimulationResult;

/**
 * `Simulate`: replays the agent's recent audit entries against its current policies and
 * against them with the draft (`simulation/simulate.ts`). INVALID_ARGUMENT for a bad request
 * or draft; UNAVAILABLE when the audit service (or Postgres) cannot be read or is not configured.
 */
export function createSimulateHandler(deps: SimulationDeps): grpc.handleUnaryCall<SimulateRequest, SimulateResponse> {
  return (call, callback) => {
    void simulate(deps, call.request).then(
      (result) => callback(null, result),
      (err: unknown) => callback(toGrpcError(err)),
    );
  };
}
