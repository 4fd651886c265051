/** TypeScript shapes of the proto messages, as proto-loader delivers them (camelCase, longs as numbers). */

export interface MemberMsg { id: string; role: string; status: string; email: string }

export interface AuthorizeRequest {
  agentId: string;
  member: MemberMsg;
  service: string;
  tool: string;
  toolArgsJson: string;
  sessionId: string;
  policyVersion: number;
  nowMs: number;
}

export interface AuthorizeResponse {
  /** `APPROVAL_REQUIRED`: an approval policy matched and no forbid did (decision 063); never forwarded as such. */
  decision: 'ALLOW' | 'DENY' | 'APPROVAL_REQUIRED';
  reason: string;
  matchedPolicyKeys: string[];
  matchedPolicyNames: string[];
  matchedPolicyIds: string[];
  policyVersionIds: string[];
  principal: string;
  action: string;
  resource: string;
  policyVersion: number;
  /** ALLOW | DENY with the agent's shadow policies enforced too; '' (or absent) when it has none (decision 061). */
  shadowDecision?: string;
  /** Keys of the shadow policies that decided `shadowDecision`, sorted. */
  shadowPolicyKeys?: string[];
  /** Their database ids, same order. */
  shadowPolicyIds?: string[];
  /** With APPROVAL_REQUIRED: the matched approval policies' keys, sorted (decision 063). */
  approvalPolicyKeys?: string[];
  /** Their database ids, same order. */
  approvalPolicyIds?: string[];
  /** The version in force of each, same order: what an approval is bound to. */
  approvalPolicyVersionIds?: string[];
}

/** One call on the `AuthorizeStream` stream; `traceHeaders` carries what unary calls put in metadata. */
export interface AuthorizeStreamRequest { id: number; request: AuthorizeRequest; traceHeaders: Record<string, string> }

/** A gRPC status for one request of the stream (the stream itself goes on). */
export interface AuthorizeErrorMsg { code: number; message: string }

/** The answer to the stream's request `id`: a verdict or an error (`outcome` names which, as proto-loader sets it). */
export type AuthorizeStreamResponse =
  | { id: number; outcome?: 'response'; response: AuthorizeResponse; error?: null }
  | { id: number; outcome?: 'error'; error: AuthorizeErrorMsg; response?: null };

export interface AuditFilterMsg {
  agentIds: string[];
  from: string;
  to: string;
  agent: string;
  service: string;
  tool: string;
  result: string;
  member: string;
  policy: string;
  /** Of `agentIds`, those whose current name contains `agent` (absent or empty: none). */
  agentIdsByCurrentName?: string[];
}

export interface AuditEntryMsg {
  id: string;
  timestamp: string;
  agentId: string;
  agentName: string;
  memberId: string;
  memberName: string;
  memberKeyId: string;
  sessionId: string;
  service: string;
  tool: string;
  action: string;
  resource: string;
  callerIp: string;
  toolArgsJson: string;
  decision: string;
  reason: string;
  matchedPolicyIds: string[];
  matchedPolicyNames: string[];
  matchedPolicyDbIds: string[];
  policyVersionIds: string[];
  durationMs: number;
  principal: string;
  /** The OAuth client of the call; '' or absent for a member key (decision 053). */
  oauthClientId?: string;
  /** ALLOW | DENY with the shadow policies enforced; '' or absent when the agent had none (decision 061). */
  shadowDecision?: string;
  shadowPolicyIds?: string[];
  shadowPolicyDbIds?: string[];
  /** The call approval the entry is an event of, and which event; '' or absent otherwise (decision 063). */
  approvalId?: string;
  approvalEvent?: string;
  /** The owner who approved or denied; '' or absent otherwise. */
  approverId?: string;
  approverName?: string;
}

/** `redactPolicyAgentIds`: agents whose policy identities the caller may not see (decision 022); absent = none. */
export interface QueryRequest { filter: AuditFilterMsg; limit: number; offset: number; redactPolicyAgentIds?: string[] }
export interface QueryResponse { entries: AuditEntryMsg[]; total: number }
export interface ExportRequest { filter: AuditFilterMsg; limit: number; offset: number; format: string; redactPolicyAgentIds: string[] }
export interface ExportChunk { data: Buffer }
export interface MembersRequest { agentIds: string[] }
export interface MembersResponse { members: Array<{ memberId: string; memberName: string }> }
export interface StatsRequest { agentIds: string[]; from: string; to: string }
export interface StatsResponse { calls: number; allowed: number; denied: number }
export interface MemberStatsRequest { agentIds: string[]; from: string; to: string }
/** One member's activity in `MemberStatsResponse`; `lastCallAt` is ISO 8601. */
export interface MemberActivityMsg { memberId: string; memberName: string; calls: number; allowed: number; denied: number; lastCallAt: string }
export interface MemberStatsResponse { members: MemberActivityMsg[] }

export interface SessionActivityRequest { agentId: string; sessionId: string; redactPolicyIdentities?: boolean }
export interface ToolUsageMsg { service: string; tool: string; calls: number; allowed: number; denied: number }
export interface PolicyHitsMsg { policyDbId: string; policyKey: string; policyName: string; hits: number }
export interface SessionActivityResponse {
  calls: number; allowed: number; denied: number; firstCallAt: string; lastCallAt: string;
  tools: ToolUsageMsg[]; policies: PolicyHitsMsg[];
}

/** `Histogram`: `Query`'s filter and redaction; the buckets count what `Query`'s `total` counts. */
export interface HistogramRequest { filter: AuditFilterMsg; redactPolicyAgentIds?: string[] }
/** `start` is ISO 8601; a bucket is `[start, start + bucketSeconds)`. */
export interface HistogramBucketMsg { start: string; calls: number; denies: number }
export interface HistogramResponse { bucketSeconds: number; buckets: HistogramBucketMsg[] }

/** `Overview`: `top` 0 = 10, at most 50; `redactPolicyAgentIds` are left out of the denied policies. */
export interface OverviewRequest { agentIds: string[]; from: string; to: string; redactPolicyAgentIds?: string[]; top?: number }
export interface DeniedToolMsg { service: string; tool: string; denies: number }
export interface DeniedPolicyMsg { policyDbId: string; policyKey: string; policyName: string; agentId: string; denies: number }
export interface MemberDenyRateMsg { memberId: string; memberName: string; agentId: string; calls: number; denies: number }
/** `lastErrorAt` is ISO 8601. */
export interface AgentUpstreamErrorsMsg { agentId: string; agentName: string; errors: number; lastErrorAt: string }
export interface OverviewResponse {
  series: HistogramResponse;
  calls: number;
  denies: number;
  topDeniedTools: DeniedToolMsg[];
  topDeniedPolicies: DeniedPolicyMsg[];
  memberDenyRates: MemberDenyRateMsg[];
  agentsWithErrors: AgentUpstreamErrorsMsg[];
}

/** `ShadowResults` (decision 062): one shadow policy's would-be changes since `since`. */
export interface ShadowResultsRequest { agentId: string; policyDbId: string; since: string; sampleLimit?: number }
export interface ShadowSampleMsg {
  entryId: string; timestamp: string; memberId: string; memberName: string; service: string; tool: string; decision: string; shadowDecision: string;
}
export interface ShadowResultsResponse {
  evaluated: number; matched: number; allowToDeny: number; denyToAllow: number; samples: ShadowSampleMsg[]; lastMatched: string;
}
