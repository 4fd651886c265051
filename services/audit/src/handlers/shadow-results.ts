import type { ShadowResultsRequest, ShadowResultsResponse } from '@portcullis/core';
import type { AuditStore } from '../store/audit-store.ts';
import { parseShadowResultsRequest } from './parse-request.ts';

/** `ShadowResults`: what one shadow policy would have changed since it was put in shadow (decision 062). */
export async function handleShadowResults(deps: { store: Pick<AuditStore, 'shadowResults'> }, request: ShadowResultsRequest): Promise<ShadowResultsResponse> {
  const { agentId, policyDbId, since, sampleLimit } = parseShadowResultsRequest(request);
  return deps.store.shadowResults(agentId, policyDbId, since, sampleLimit);
}
