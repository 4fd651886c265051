import type { StatsRequest, StatsResponse } from '@portcullis/core';
import type { AuditStore } from '../store/audit-store.ts';
import { parseStatsRequest } from './parse-request.ts';

/** `Stats`: calls, allowed and denied for the given agents in an inclusive time range. */
export async function handleStats(deps: { store: Pick<AuditStore, 'stats'> }, request: StatsRequest): Promise<StatsResponse> {
  return deps.store.stats(parseStatsRequest(request));
}
