import * as grpc from '@grpc/grpc-js';
import {
  AuditQueryService, channelOptions,
  type MembersRequest, type MembersResponse, type QueryRequest, type QueryResponse, type StatsRequest, type StatsResponse,
} from '@portcullis/core';

export interface AuditClient {
  query(request: QueryRequest): Promise<QueryResponse>;
  members(request: MembersRequest): Promise<MembersResponse>;
  stats(request: StatsRequest): Promise<StatsResponse>;
  close(): void;
}

export function createAuditClient(address: string, timeoutMs = 30_000): AuditClient {
  const client = new AuditQueryService(address, grpc.credentials.createInsecure(), channelOptions);
  const unary = <Req, Res>(method: string) => (request: Req) =>
    new Promise<Res>((resolve, reject) => {
      client[method]!(request, { deadline: Date.now() + timeoutMs }, (err: grpc.ServiceError | null, response: Res) => {
        if (err) reject(err);
        else resolve(response);
      });
    });
  return {
    query: unary<QueryRequest, QueryResponse>('Query'),
    members: unary<MembersRequest, MembersResponse>('Members'),
    stats: unary<StatsRequest, StatsResponse>('Stats'),
    close: () => client.close(),
  };
}
