import type { AuditStore } from '../store/audit-store.ts';
import { parsePolicyTriggersRequest } from './parse-request.ts';

/** `PolicyTriggersRequest` as proto-loader delivers it. */
export interface PolicyTriggersRequest { agentId: string; policyDbIds: string[] }
/** `PolicyTriggersResponse`: one item per policy id that matched at least once. */
export interface PolicyTriggersResponse { triggers: Array<{ policyDbId: string; count: number; lastTriggered: string }> }

/** `PolicyTriggers`: how often each of an agent's policies matched a call, and when it last did. */
export async function handlePolicyTriggers(deps: { store: Pick<AuditStore, 'policyTriggers'> }, request: PolicyTriggersRequest): Promise<PolicyTriggersResponse> {
  const { agentId, policyDbIds } = parsePolicyTriggersRequest(request);
  return { triggers: await deps.store.policyTriggers(agentId, policyDbIds) };
}
