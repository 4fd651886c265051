/**
 * Typed calls for the agent pages: agents, members and keys, connectors, credentials and the
 * caller's own connections. Each is one REST call of the gateway (interface spec part 4,
 * DESIGN §3); errors arrive as `ApiError` from `client.ts`.
 */
import { api } from './client.ts';
import type {
  Agent, AgentList, AgentSortBy, AuditEntry, AuditPage, ConnectionList, ConnectorsMeta, CredentialsList, CredentialsSet,
  Invite, IssuedKey, JoinResult, Member, MemberList, MemberStats, MemberStatus, Onboarding, ResetLostResult,
} from './types.ts';

const agentPath = (id: string) => `/api/agents/${encodeURIComponent(id)}`;
const memberPath = (id: string, memberId: string) => `${agentPath(id)}/members/${encodeURIComponent(memberId)}`;

export interface AgentListQuery {
  search?: string;
  status?: 'active' | 'disabled';
  role?: 'owner' | 'member';
  sortBy?: AgentSortBy;
  sortDir?: 'asc' | 'desc';
  limit?: number;
  offset?: number;
}

export const listAgents = (query: AgentListQuery) => api.get<AgentList>('/api/agents', { ...query });
export const createAgent = (body: { name: string; tags?: string[]; type?: 'standard' | 'trusted' }) => api.post<Agent>('/api/agents', body);
export const getAgent = (id: string) => api.get<Agent>(agentPath(id));
export const updateAgent = (id: string, body: { name?: string; tags?: string[] }) => api.put<Agent>(agentPath(id), body);
export const deleteAgent = (id: string) => api.delete(agentPath(id));
export const setAgentStatus = (id: string, status: 'active' | 'disabled') => api.put<Agent>(`${agentPath(id)}/status`, { status });
export const setAgentServices = (id: string, services: string[]) => api.put<Agent>(`${agentPath(id)}/services`, { services });
export const getOnboarding = (id: string) => api.get<Onboarding>(`${agentPath(id)}/onboarding`);

export const listMembers = (id: string, query: { status?: MemberStatus; limit?: number; offset?: number } = {}) =>
  api.get<MemberList>(`${agentPath(id)}/members`, { ...query });
export const inviteMember = (id: string, email: string) => api.post<Invite>(`${agentPath(id)}/invite`, { email });
export const joinAgent = (id: string, token: string) => api.post<JoinResult>(`${agentPath(id)}/join`, { token });
export const approveMember = (id: string, memberId: string) => api.put<Member>(`${memberPath(id, memberId)}/status`, { status: 'approved' });
export const rejectMember = (id: string, memberId: string) => api.post<Member>(`${memberPath(id, memberId)}/reject`);
export const removeMember = (id: string, memberId: string) => api.delete(memberPath(id, memberId));

/** Generates or rotates the caller's own key; `currentKey` keeps existing connections readable. */
export const issueKey = (id: string, memberId: string, currentKey?: string) =>
  api.put<IssuedKey>(`${memberPath(id, memberId)}/key`, currentKey ? { currentKey } : {});
export const revokeKey = (id: string, memberId: string) => api.delete(`${memberPath(id, memberId)}/key`);
export const resetLostKey = (id: string, memberId: string) => api.post<ResetLostResult>(`${memberPath(id, memberId)}/key/reset-lost`);
export const memberConnections = (id: string, memberId: string) => api.get<ConnectionList>(`${memberPath(id, memberId)}/connections`);

export const connectorsMeta = () => api.get<ConnectorsMeta>('/api/connectors/meta');
export const listCredentials = (id: string) => api.get<CredentialsList>(`${agentPath(id)}/services/credentials`);
export const setCredentials = (id: string, service: string, body: { clientId: string; clientSecret: string; webhookSecret?: string; clearWebhookSecret?: true }) =>
  api.put<CredentialsSet>(`${agentPath(id)}/services/${encodeURIComponent(service)}/credentials`, body);
export const deleteCredentials = (id: string, service: string) => api.delete(`${agentPath(id)}/services/${encodeURIComponent(service)}/credentials`);

/** Starts the OAuth flow for the caller's own account; the browser then goes to `authorizeUrl`. */
export const startConnect = (id: string, service: string) => api.post<{ authorizeUrl: string }>(`${agentPath(id)}/connect/${encodeURIComponent(service)}`);
export const disconnect = (id: string, service: string) => api.delete(`${agentPath(id)}/connect/${encodeURIComponent(service)}`);

export const memberStats = (agentId: string, range: { from?: string; to?: string } = {}) =>
  api.get<MemberStats>('/api/dashboard/member-stats', { agentId, ...range });

/**
 * The audit entries of one agent since `from`, newest first. `agent` is a name *substring*
 * filter, so entries of other agents whose names contain this one are dropped by id here.
 * Reads at most `maxPages` pages of 500.
 */
export async function agentAudit(agent: { id: string; name: string }, query: { from?: string; result?: 'ALLOW' | 'DENY' }, maxPages = 4): Promise<{ entries: AuditEntry[]; truncated: boolean }> {
  const entries: AuditEntry[] = [];
  for (let page = 0; page < maxPages; page += 1) {
    const answer = await api.get<AuditPage>('/api/audit', { agent: agent.name, ...query, limit: 500, offset: page * 500 });
    entries.push(...answer.entries.filter((e) => e.agentId === agent.id));
    if (answer.entries.length < 500 || (page + 1) * 500 >= answer.total) return { entries, truncated: false };
  }
  return { entries, truncated: true };
}

/** What an invite token says about itself (its payload is readable; only the server can verify it). */
export interface InviteTokenPayload { inviteId: string; agentId: string; email: string; exp: number }

export function readInviteToken(token: string): InviteTokenPayload | undefined {
  const [encoded] = token.split('.');
  if (!encoded || !/^[A-Za-z0-9_-]+$/.test(encoded)) return undefined;
  try {
    const base64 = encoded.replace(/-/g, '+').replace(/_/g, '/').padEnd(Math.ceil(encoded.length / 4) * 4, '=');
    const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
    const payload = JSON.parse(new TextDecoder().decode(bytes)) as Partial<InviteTokenPayload>;
    if (typeof payload.agentId !== 'string' || typeof payload.email !== 'string' || typeof payload.exp !== 'number') return undefined;
    return { inviteId: String(payload.inviteId ?? ''), agentId: payload.agentId, email: payload.email, exp: payload.exp };
  } catch {
    return undefined;
  }
}

/** `login` (or `name`, `email`) of a connection's identity, for display. */
export function identityLabel(identityInfo: Record<string, unknown> | undefined): string {
  for (const key of ['login', 'name', 'email', 'username']) {
    const value = identityInfo?.[key];
    if (typeof value === 'string' && value) return value;
  }
  return 'connected account';
}
