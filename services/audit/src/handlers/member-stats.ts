import type { MemberStatsRequest, MemberStatsResponse } from '@portcullis/core';
import type { AuditStore } from '../store/audit-store.ts';
import { parseStatsRequest } from './parse-request.ts';

/**
 * `MemberStats`: per member of the given agents' entries (optionally in an inclusive time
 * range), calls, allowed, denied and the newest call. The request has `Stats`' shape and rules:
 * empty `agent_ids` → no members; a bad date or `from` after `to` → INVALID_ARGUMENT.
 */
export async function handleMemberStats(deps: { store: Pick<AuditStore, 'memberStats'> }, request: MemberStatsRequest): Promise<MemberStatsResponse> {
  return { members: await deps.store.memberStats(parseStatsRequest(request)) };
}
