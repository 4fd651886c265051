import { ApiError, call, http } from './client.ts';
import { getAgent } from './agents.ts';
import type { Agent, SessionActivity, ToolSession, ToolSessionPage } from './types.ts';

export type SessionStatus = ToolSession['status'];
export const SESSION_STATUSES: SessionStatus[] = ['active', 'expired', 'terminated'];

/** Which list the caller may read: every session of the agent (owner) or only their own. */
export type SessionScope = 'all' | 'mine';

/** The caller's scope on an agent's sessions, from their membership (GET /api/agents/:id). */
export async function sessionScope(agentId: string): Promise<{ agent: Agent; scope: SessionScope }> {
  const agent = await getAgent(agentId);
  return { agent, scope: agent.membership.role === 'owner' ? 'all' : 'mine' };
}

export interface SessionListQuery { status?: SessionStatus; limit: number; offset: number }

/**
 * Tool sessions, newest first: the owner list, or the caller's own. Should the owner list be
 * refused (the role changed since it was read), the caller's own sessions are listed instead.
 */
export async function listToolSessions(agentId: string, scope: SessionScope, query: SessionListQuery): Promise<ToolSessionPage & { scope: SessionScope }> {
  const params = { path: { id: agentId }, query: { ...query } };
  if (scope === 'all') {
    try {
      return { ...(await call(http.GET('/api/agents/{id}/sessions', { params }))), scope };
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 403)) throw err;
    }
  }
  return { ...(await call(http.GET('/api/agents/{id}/my-sessions', { params }))), scope: 'mine' };
}

export function sessionActivity(agentId: string, sessionId: string): Promise<SessionActivity> {
  return call(http.GET('/api/agents/{id}/sessions/{sessionId}/activity', { params: { path: { id: agentId, sessionId } } }));
}

/** Terminates the session; its client must initialize again and its session counters start fresh. */
export function resetToolSession(agentId: string, sessionId: string): Promise<ToolSession> {
  return call(http.POST('/api/agents/{id}/sessions/{sessionId}/reset', { params: { path: { id: agentId, sessionId } } }));
}
