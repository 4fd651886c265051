import type { SessionActivityRequest, SessionActivityResponse } from '@portcullis/core';
import type { AuditStore } from '../store/audit-store.ts';
import { InvalidArgumentError } from './parse-request.ts';

const ID = /^[A-Za-z0-9_-]{1,100}$/;

/**
 * `SessionActivity`: one tool session's totals, per-tool usage and policy hit counts. Both ids
 * are required (the gateway checked the caller may see the session). With
 * `redact_policy_identities` (the caller may not see the agent's policies, decision 022) the
 * per-policy hits are left out: their keys, names and ids are what is hidden, and even bare
 * counts per policy would tell the policies apart.
 */
export async function handleSessionActivity(deps: { store: Pick<AuditStore, 'sessionActivity'> }, request: SessionActivityRequest): Promise<SessionActivityResponse> {
  if (!ID.test(request.agentId ?? '')) throw new InvalidArgumentError('agent_id: required, an id');
  if (!ID.test(request.sessionId ?? '')) throw new InvalidArgumentError('session_id: required, an id');
  const activity = await deps.store.sessionActivity(request.agentId, request.sessionId);
  return request.redactPolicyIdentities ? { ...activity, policies: [] } : activity;
}
