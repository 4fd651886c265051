import type { OverviewRequest, OverviewResponse } from '@portcullis/core';
import type { AuditStore } from '../store/audit-store.ts';
import { parseOverviewRequest } from './parse-request.ts';

/**
 * `Overview`: the dashboard's home overview over the given agents and range — the series of
 * entries and denies, top denied tools, top denied policies (none of the agents in
 * `redact_policy_agent_ids`, decision 022), deny rates per member, agents with upstream errors.
 * Decision 037.
 */
export async function handleOverview(deps: { store: Pick<AuditStore, 'overview'> }, request: OverviewRequest): Promise<OverviewResponse> {
  return deps.store.overview(parseOverviewRequest(request));
}
