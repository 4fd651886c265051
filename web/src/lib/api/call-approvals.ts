/**
 * Calls for call approvals (issue 20 part 1, decision 063): an agent's requests, approving and
 * denying one, its live events, and the pending ones across every agent the caller owns.
 * Owner only, as the policy routes. Every call throws `ApiError` on a non-2xx answer.
 */
import { apiErrorOf, ApiError } from './client.ts';

// TEMPORARY: the server routes have not landed yet; once they have, these shapes come from the
// generated `openapi.d.ts` (decision 040) and the calls below use `call(http.…)`.
export type CallApprovalStatus = 'pending' | 'approved' | 'denied' | 'expired' | 'executed';
export interface CallApproval {
  id: string;
  agentId: string;
  memberId: string;
  memberEmail: string;
  service: string;
  tool: string;
  toolArgs: Record<string, unknown>;
  argsDigest: string;
  policyId: string;
  policyName: string;
  policyVersionId: string;
  status: CallApprovalStatus;
  reason: string | null;
  approverId: string | null;
  approverEmail: string | null;
  createdAt: string;
  expiresAt: string;
  decidedAt: string | null;
  executedAt: string | null;
  auditEntryIds: string[];
}
export interface CallApprovalPage { approvals: CallApproval[]; total: number }

async function request<T>(method: string, path: string, body?: unknown): Promise<T> {
  let response: Response;
  try {
    response = await fetch(path, { method, credentials: 'same-origin', ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }) });
  } catch {
    throw new ApiError(0, 'network', 'The server could not be reached. Check your connection and try again.');
  }
  const text = await response.text();
  let parsed: unknown;
  try { parsed = text ? JSON.parse(text) : undefined; } catch { parsed = undefined; }
  if (!response.ok) throw apiErrorOf(response, parsed);
  return parsed as T;
}

const base = (agentId: string) => `/api/agents/${encodeURIComponent(agentId)}/call-approvals`;

export interface CallApprovalQuery { status?: CallApprovalStatus; limit?: number; offset?: number }

export const callApprovalsApi = {
  /** Newest first; no status means every status. */
  list: (agentId: string, q: CallApprovalQuery = {}) => {
    const params = new URLSearchParams(Object.entries(q).filter(([, v]) => v !== undefined).map(([k, v]) => [k, String(v)]));
    const text = params.toString();
    return request<CallApprovalPage>('GET', `${base(agentId)}${text ? `?${text}` : ''}`);
  },
  get: (agentId: string, approvalId: string) => request<CallApproval>('GET', `${base(agentId)}/${encodeURIComponent(approvalId)}`),
  /** 409 when the request is no longer pending (decided by someone else, or expired). */
  approve: (agentId: string, approvalId: string, comment?: string) =>
    request<CallApproval>('POST', `${base(agentId)}/${encodeURIComponent(approvalId)}/approve`, comment ? { comment } : {}),
  /** `reason` (1–500 characters) is what the agent reads when it retries. 409 as approve. */
  deny: (agentId: string, approvalId: string, reason: string) =>
    request<CallApproval>('POST', `${base(agentId)}/${encodeURIComponent(approvalId)}/deny`, { reason }),
  /** The pending requests across every agent the caller owns (home card and nav badge). */
  pendingAcrossAgents: () => request<CallApprovalPage>('GET', '/api/dashboard/call-approvals?limit=200'),
};

/** The live stream of an agent's approval events (SSE, `event: approval`, data: the record). */
export const callApprovalEventsUrl = (agentId: string) => `${base(agentId)}/events`;
