/**
 * Calls for call approvals (issue 20 part 1, decision 063): an agent's requests, approving and
 * denying one, revealing its masked arguments (recorded, decision 067), its live events, and the
 * pending ones across every agent the caller owns.
 * Owner only, as the policy routes. Every call throws `ApiError` on a non-2xx answer.
 */
import { call, http, type Answer, type Body, type Query } from './client.ts';

/** A call approval as the API shows it (decision 063); `status` is the effective one. */
export type CallApproval = Answer<'/api/agents/{id}/call-approvals/{approvalId}'>;
export type CallApprovalStatus = CallApproval['status'];
export type CallApprovalPage = Answer<'/api/agents/{id}/call-approvals'>;
export type CallApprovalQuery = Query<'/api/agents/{id}/call-approvals'>;
export type ApproveBody = Body<'/api/agents/{id}/call-approvals/{approvalId}/approve', 'post'>;
/** The exact arguments, unmasked, with the spans at their places, and the reveal as recorded. */
export type RevealedArgs = Answer<'/api/agents/{id}/call-approvals/{approvalId}/reveal', 'post'>;

const approval = (id: string, approvalId: string) => ({ params: { path: { id, approvalId } } });

export const callApprovalsApi = {
  /** Newest first; no status means every status. */
  list: (agentId: string, query: CallApprovalQuery = {}) =>
    call(http.GET('/api/agents/{id}/call-approvals', { params: { path: { id: agentId }, query } })),
  get: (agentId: string, approvalId: string) => call(http.GET('/api/agents/{id}/call-approvals/{approvalId}', approval(agentId, approvalId))),
  /** 409 when the request is no longer pending (decided by someone else, or expired). */
  approve: (agentId: string, approvalId: string, comment?: string) =>
    call(http.POST('/api/agents/{id}/call-approvals/{approvalId}/approve', { ...approval(agentId, approvalId), body: (comment ? { comment } : {}) satisfies ApproveBody })),
  /** `reason` (1–500 characters) is what the agent reads when it retries. 409 as approve. */
  deny: (agentId: string, approvalId: string, reason: string) =>
    call(http.POST('/api/agents/{id}/call-approvals/{approvalId}/deny', { ...approval(agentId, approvalId), body: { reason } })),
  /**
   * The exact arguments with the masked spans shown; recorded (who, when) and listed on the
   * request for every owner. 409 once the request is executed, denied or expired (they are destroyed).
   */
  reveal: (agentId: string, approvalId: string) =>
    call(http.POST('/api/agents/{id}/call-approvals/{approvalId}/reveal', { ...approval(agentId, approvalId), body: {} })),
  /** The pending requests across every agent the caller owns, the one expiring first on top (home card and header badge). */
  pendingAcrossAgents: () => call(http.GET('/api/dashboard/call-approvals', { params: { query: { limit: 200 } } })),
};

/** The live stream of an agent's approval events (SSE, `event: approval`, data: the record). */
export const callApprovalEventsUrl = (agentId: string) => `/api/agents/${encodeURIComponent(agentId)}/call-approvals/events`;
