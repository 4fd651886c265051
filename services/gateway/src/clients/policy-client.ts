import * as grpc from '@grpc/grpc-js';
import { channelOptions, PolicyDecisionService, type AuthorizeRequest, type AuthorizeResponse } from '@portcullis/core';

export interface PolicyClient {
  /** A verdict from the PDP; rejects when the PDP cannot be reached in time. */
  authorize(request: AuthorizeRequest): Promise<AuthorizeResponse>;
  close(): void;
}

export function createPolicyClient(address: string, timeoutMs: number): PolicyClient {
  const client = new PolicyDecisionService(address, grpc.credentials.createInsecure(), channelOptions);
  return {
    authorize(request) {
      return new Promise((resolve, reject) => {
        client.Authorize!(request, { deadline: Date.now() + timeoutMs }, (err: grpc.ServiceError | null, response: AuthorizeResponse) => {
          if (err) reject(err);
          else resolve(response);
        });
      });
    },
    close: () => client.close(),
  };
}
