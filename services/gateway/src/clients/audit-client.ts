import * as grpc from '@grpc/grpc-js';
import {
  AuditQueryService, channelOptions,
  type ExportChunk, type ExportRequest, type HistogramRequest, type HistogramResponse, type MemberStatsRequest, type MemberStatsResponse,
  type OverviewRequest, type OverviewResponse,
  type MembersRequest, type MembersResponse, type QueryRequest, type QueryResponse, type StatsRequest, type StatsResponse,
  type SessionActivityRequest, type SessionActivityResponse, type ShadowResultsRequest, type ShadowResultsResponse,
} from '@portcullis/core';

/** `PolicyTriggersRequest` / `PolicyTriggersResponse` of `portcullis.audit.v1`. */
export interface PolicyTriggersRequest { agentId: string; policyDbIds: string[] }
export interface PolicyTriggersResponse { triggers: Array<{ policyDbId: string; count: number; lastTriggered: string }> }

export interface AuditClient {
  query(request: QueryRequest): Promise<QueryResponse>;
  members(request: MembersRequest): Promise<MembersResponse>;
  stats(request: StatsRequest): Promise<StatsResponse>;
  /** Per policy id that matched at least once: count and newest match. Short deadline: a list waits for it. */
  policyTriggers(request: PolicyTriggersRequest): Promise<PolicyTriggersResponse>;
  /** Per-member calls, allowed, denied and last call over the given agents. */
  memberStats(request: MemberStatsRequest): Promise<MemberStatsResponse>;
  /** One tool session's per-tool usage and policy hit counts. */
  sessionActivity(request: SessionActivityRequest): Promise<SessionActivityResponse>;
  /** Entries and denies per time bucket over `Query`'s filters (decision 037). */
  histogram(request: HistogramRequest): Promise<HistogramResponse>;
  /** The dashboard's home overview over the given agents (decision 037). */
  overview(request: OverviewRequest): Promise<OverviewResponse>;
  /** One shadow policy's would-be changes since it went into shadow (decision 062). */
  shadowResults(request: ShadowResultsRequest): Promise<ShadowResultsResponse>;
  /**
   * `Export` as a server stream of CSV/NDJSON chunks. No deadline (a bulk export may run long):
   * the caller cancels the call when its own client goes away (see `exportBody`).
   */
  export(request: ExportRequest): grpc.ClientReadableStream<ExportChunk>;
  close(): void;
}

/** The policies list degrades to `triggerCount: null` rather than wait longer than this (decision 012). */
const POLICY_TRIGGERS_TIMEOUT_MS = 3_000;

/**
 * HTTP/2 flow-control window of the audit channel. At HTTP/2's default 64 kB the audit service
 * could send one 64 kB export chunk and then waited a round trip for the window to open again;
 * an export paused by a slow client buffers at most this much per call in the gateway.
 */
const EXPORT_WINDOW_BYTES = 4 * 1024 * 1024;

export function createAuditClient(address: string, timeoutMs = 30_000): AuditClient {
  const client = new AuditQueryService(address, grpc.credentials.createInsecure(), { ...channelOptions, 'grpc-node.flow_control_window': EXPORT_WINDOW_BYTES });
  const unary = <Req, Res>(method: string, deadlineMs = timeoutMs) => (request: Req) =>
    new Promise<Res>((resolve, reject) => {
      client[method]!(request, { deadline: Date.now() + deadlineMs }, (err: grpc.ServiceError | null, response: Res) => {
        if (err) reject(err);
        else resolve(response);
      });
    });
  return {
    query: unary<QueryRequest, QueryResponse>('Query'),
    members: unary<MembersRequest, MembersResponse>('Members'),
    stats: unary<StatsRequest, StatsResponse>('Stats'),
    policyTriggers: unary<PolicyTriggersRequest, PolicyTriggersResponse>('PolicyTriggers', Math.min(timeoutMs, POLICY_TRIGGERS_TIMEOUT_MS)),
    memberStats: unary<MemberStatsRequest, MemberStatsResponse>('MemberStats'),
    sessionActivity: unary<SessionActivityRequest, SessionActivityResponse>('SessionActivity'),
    histogram: unary<HistogramRequest, HistogramResponse>('Histogram'),
    overview: unary<OverviewRequest, OverviewResponse>('Overview'),
    shadowResults: unary<ShadowResultsRequest, ShadowResultsResponse>('ShadowResults'),
    export: (request) => client.Export!(request) as grpc.ClientReadableStream<ExportChunk>,
    close: () => client.close(),
  };
}
