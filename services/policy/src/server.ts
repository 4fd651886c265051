import * as grpc from '@grpc/grpc-js';
import {
  channelOptions, PolicyDecisionService, type AuthorizeRequest, type AuthorizeResponse, type AuthorizeStreamRequest, type AuthorizeStreamResponse,
} from '@portcullis/core';
import type { PreviewRequest, PreviewResponse } from './handlers/preview.ts';
import type { SimulateRequest, SimulateResponse } from './handlers/simulate.ts';

/** The handlers of `portcullis.policy.v1.PolicyDecision`, one per RPC. */
export interface PolicyDecisionHandlers {
  Authorize: grpc.handleUnaryCall<AuthorizeRequest, AuthorizeResponse>;
  AuthorizeStream: grpc.handleBidiStreamingCall<AuthorizeStreamRequest, AuthorizeStreamResponse>;
  Preview: grpc.handleUnaryCall<PreviewRequest, PreviewResponse>;
  Simulate: grpc.handleUnaryCall<SimulateRequest, SimulateResponse>;
}

/** A gRPC server serving `handlers`; not bound yet. */
export function createPolicyServer(handlers: PolicyDecisionHandlers): grpc.Server {
  const server = new grpc.Server(channelOptions);
  server.addService(PolicyDecisionService.service, { ...handlers });
  return server;
}
