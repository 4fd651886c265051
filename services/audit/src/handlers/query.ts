import { redactPolicyIdentities, toAuditEntryMsg, type QueryRequest, type QueryResponse } from '@portcullis/core';
import type { AuditStore } from '../store/audit-store.ts';
import { parseQueryRequest } from './parse-request.ts';

/**
 * `Query`: one page of matching entries, newest first, with the count of all matches. Entries
 * of `redact_policy_agent_ids` come without policy identities (decision 022).
 */
export async function handleQuery(deps: { store: Pick<AuditStore, 'query'> }, request: QueryRequest): Promise<QueryResponse> {
  const { filter, page, redactPolicyAgentIds } = parseQueryRequest(request);
  const { entries, total } = await deps.store.query(filter, page);
  return { entries: entries.map((e) => toAuditEntryMsg(redactPolicyAgentIds.has(e.agentId) ? redactPolicyIdentities(e) : e)), total };
}
