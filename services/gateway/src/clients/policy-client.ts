import * as grpc from '@grpc/grpc-js';
import { channelOptions, currentTraceHeaders, PolicyDecisionService, type AuthorizeRequest, type AuthorizeResponse } from '@portcullis/core';
import { createAuthorizeStreams, type AuthorizeStreamsOptions } from './authorize-streams.ts';

/** `PreviewRequest` / `PreviewResponse` of `portcullis.policy.v1` (camelCase, as proto-loader delivers them). */
export interface PreviewRequest { agentId: string; draftJson: string }
export interface PreviewResponse { cedar: string; errors: string[]; warnings: string[] }

/** `SimulateRequest` / `SimulateResponse`; empty strings and 0 mean "not set". */
export interface SimulateRequest { agentId: string; draftJson: string; replacePolicyId: string; from: string; to: string; limit: number }
export interface SimulateResponse {
  evaluated: number;
  unchanged: number;
  allowToDeny: number;
  denyToAllow: number;
  /** The entry's time, member and tool came later (issue 18): empty from a PDP that predates them. */
  samples: Array<{ entryId: string; before: string; after: string; reason: string; timestamp?: string; memberId?: string; memberName?: string; service?: string; tool?: string }>;
  /** Entries read but not replayed; the window actually read. Absent from PDPs that predate them. */
  skipped?: number;
  from?: string;
  to?: string;
  /** The draft's mode (decision 061); empty from a PDP that predates shadow policies. */
  draftMode?: string;
  /** Calls whose enforced verdict saving the draft changes; absent from a PDP that predates shadow policies. */
  enforcedChanges?: number;
  /** Calls that would become approval-required, and that would stop being so (decision 063); absent from older PDPs. */
  toApproval?: number;
  fromApproval?: number;
}

export interface PolicyClient {
  /** A verdict from the PDP; rejects when the PDP cannot be reached in time. */
  authorize(request: AuthorizeRequest): Promise<AuthorizeResponse>;
  /** Compiles a draft to Cedar without saving it; problems with the draft come back in `errors`. */
  preview(request: PreviewRequest): Promise<PreviewResponse>;
  /** Replays recent audit traffic against a draft; rejects with the PDP's gRPC status. */
  simulate(request: SimulateRequest): Promise<SimulateResponse>;
  close(): void;
}

/** Replaying traffic reads up to 10,000 entries: it gets longer than a verdict. */
const SIMULATE_TIMEOUT_FLOOR_MS = 30_000;

/**
 * The gateway's client of the decision point at `address` (one channel, round robin over the
 * addresses the name resolves to). Verdicts travel over long-lived `AuthorizeStream` streams
 * (decision 031); Preview and Simulate are unary calls. `streams` tunes those (tests).
 */
export function createPolicyClient(address: string, timeoutMs: number, streams: Pick<AuthorizeStreamsOptions, 'streams' | 'maxStreamAgeMs'> = {}): PolicyClient {
  const client = new PolicyDecisionService(address, grpc.credentials.createInsecure(), channelOptions);
  const unary = <Req, Res>(method: string, deadlineMs: number) => (request: Req) =>
    new Promise<Res>((resolve, reject) => {
      // The caller's trace continues in the decision point (nothing is added when tracing is off).
      const metadata = new grpc.Metadata();
      for (const [key, value] of Object.entries(currentTraceHeaders())) metadata.set(key, value);
      client[method]!(request, metadata, { deadline: Date.now() + deadlineMs }, (err: grpc.ServiceError | null, response: Res) => {
        if (err) reject(err);
        else resolve(response);
      });
    });
  const verdicts = createAuthorizeStreams(client, { ...streams, timeoutMs, unary: unary<AuthorizeRequest, AuthorizeResponse>('Authorize', timeoutMs) });
  return {
    authorize: verdicts.authorize,
    preview: unary<PreviewRequest, PreviewResponse>('Preview', Math.max(timeoutMs, 5_000)),
    simulate: unary<SimulateRequest, SimulateResponse>('Simulate', Math.max(timeoutMs, SIMULATE_TIMEOUT_FLOOR_MS)),
    close: () => {
      verdicts.close();
      client.close();
    },
  };
}
