import type { MembersRequest, MembersResponse } from '@portcullis/core';
import type { AuditStore } from '../store/audit-store.ts';
import { parseAgentIds } from './parse-request.ts';

/** `Members`: member identities in the given agents' audit data, for filter dropdowns. */
export async function handleMembers(deps: { store: Pick<AuditStore, 'members'> }, request: MembersRequest): Promise<MembersResponse> {
  const members = await deps.store.members(parseAgentIds(request.agentIds, 'agent_ids'));
  return { members };
}
