import type { SessionActivityRequest, SessionActivityResponse } from '@portcullis/core';
import type { AuditStore } from '../store/audit-store.ts';
import { InvalidArgumentError } from './parse-request.ts';

const ID = /^[A-Za-z0-9_-]{1,100}$/;

/**
 * `SessionActivity`: one tool session's totals, per-tool usage and policy hit counts. Both ids
 * are required (the gateway checked the caller may see the session).
 */
export async function handleSessionActivity(deps: { store: Pick<AuditStore, 'sessionActivity'> }, request: SessionActivityRequest): Promise<SessionActivityResponse> {
  if (!ID.test(request.agentId ?? '')) throw new InvalidArgumentError('agent_id: required, an id');
  if (!ID.test(request.sessionId ?? '')) throw new InvalidArgumentError('session_id: required, an id');
  return deps.store.sessionActivity(request.agentId, request.sessionId);
}
