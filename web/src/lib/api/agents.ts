/**
 * Typed calls for the agent pages: agents, members and keys, connectors, credentials and the
 * caller's own connections. Each is one REST call of the gateway (interface spec part 4,
 * DESIGN §3); errors arrive as `ApiError` from `client.ts`.
 */
import { call, http, query } from './client.ts';
import type {
  AgentCreate, AgentSortBy, AuditEntry, ConnectorKey, CredentialsBody, MemberStatus,
} from './types.ts';

const agent = (id: string) => ({ params: { path: { id } } });
const member = (id: string, memberId: string) => ({ params: { path: { id, memberId } } });
// Connector keys are checked by the gateway; the dashboard passes on what it read from it.
const service = (id: string, key: string) => ({ params: { path: { id, service: key as ConnectorKey } } });

export interface AgentListQuery {
  search?: string;
  status?: 'active' | 'disabled';
  role?: 'owner' | 'member';
  sortBy?: AgentSortBy;
  sortDir?: 'asc' | 'desc';
  limit?: number;
  offset?: number;
}

export const listAgents = (q: AgentListQuery) => call(http.GET('/api/agents', { params: { query: query(q) } }));
export const createAgent = (body: AgentCreate) => call(http.POST('/api/agents', { body }));
export const getAgent = (id: string) => call(http.GET('/api/agents/{id}', agent(id)));
export const updateAgent = (id: string, body: { name?: string; tags?: string[] }) => call(http.PUT('/api/agents/{id}', { ...agent(id), body }));
export const deleteAgent = (id: string) => call(http.DELETE('/api/agents/{id}', agent(id)));
export const setAgentStatus = (id: string, status: 'active' | 'disabled') => call(http.PUT('/api/agents/{id}/status', { ...agent(id), body: { status } }));
export const setAgentServices = (id: string, services: string[]) => call(http.PUT('/api/agents/{id}/services', { ...agent(id), body: { services } }));
export const getOnboarding = (id: string) => call(http.GET('/api/agents/{id}/onboarding', agent(id)));
/** The external MCP URL for the setup snippets (decision 046). */
export const clientSetup = (id: string) => call(http.GET('/api/agents/{id}/setup', agent(id)));

export const listMembers = (id: string, q: { status?: MemberStatus; limit?: number; offset?: number } = {}) =>
  call(http.GET('/api/agents/{id}/members', { params: { path: { id }, query: query(q) } }));
export const inviteMember = (id: string, email: string) => call(http.POST('/api/agents/{id}/invite', { ...agent(id), body: { email } }));
export const joinAgent = (id: string, token: string) => call(http.POST('/api/agents/{id}/join', { ...agent(id), body: { token } }));
export const approveMember = (id: string, memberId: string) =>
  call(http.PUT('/api/agents/{id}/members/{memberId}/status', { ...member(id, memberId), body: { status: 'approved' } }));
export const rejectMember = (id: string, memberId: string) => call(http.POST('/api/agents/{id}/members/{memberId}/reject', { ...member(id, memberId), body: {} }));
export const removeMember = (id: string, memberId: string) => call(http.DELETE('/api/agents/{id}/members/{memberId}', member(id, memberId)));

/** Generates or rotates the caller's own key; `currentKey` keeps existing connections readable. */
export const issueKey = (id: string, memberId: string, currentKey?: string) =>
  call(http.PUT('/api/agents/{id}/members/{memberId}/key', { ...member(id, memberId), body: currentKey ? { currentKey } : {} }));
export const revokeKey = (id: string, memberId: string) => call(http.DELETE('/api/agents/{id}/members/{memberId}/key', member(id, memberId)));
export const resetLostKey = (id: string, memberId: string) =>
  call(http.POST('/api/agents/{id}/members/{memberId}/key/reset-lost', { ...member(id, memberId), body: {} }));
export const memberConnections = (id: string, memberId: string) => call(http.GET('/api/agents/{id}/members/{memberId}/connections', member(id, memberId)));

export const connectorsMeta = () => call(http.GET('/api/connectors/meta'));
export const listCredentials = (id: string) => call(http.GET('/api/agents/{id}/services/credentials', agent(id)));
export const setCredentials = (id: string, key: string, body: CredentialsBody) =>
  call(http.PUT('/api/agents/{id}/services/{service}/credentials', { ...service(id, key), body }));
export const deleteCredentials = (id: string, key: string) => call(http.DELETE('/api/agents/{id}/services/{service}/credentials', service(id, key)));

/** Starts the OAuth flow for the caller's own account; the browser then goes to `authorizeUrl`. */
export const startConnect = (id: string, key: string) => call(http.POST('/api/agents/{id}/connect/{service}', { ...service(id, key), body: {} }));
export const disconnect = (id: string, key: string) => call(http.DELETE('/api/agents/{id}/connect/{service}', service(id, key)));

export const memberStats = (agentId: string, range: { from?: string; to?: string } = {}) =>
  call(http.GET('/api/dashboard/member-stats', { params: { query: query({ agentId, ...range }) } }));

/**
 * The audit entries of one agent (the exact `agentId` filter, decision 045) since `from`,
 * newest first. Reads at most `maxPages` pages of 500.
 */
export async function agentAudit(agent: { id: string }, filters: { from?: string; result?: 'ALLOW' | 'DENY' }, maxPages = 4): Promise<{ entries: AuditEntry[]; truncated: boolean }> {
  const entries: AuditEntry[] = [];
  for (let page = 0; page < maxPages; page += 1) {
    const answer = await call(http.GET('/api/audit', { params: { query: query({ agentId: agent.id, ...filters, limit: 500, offset: page * 500 }) } }));
    entries.push(...answer.entries);
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
