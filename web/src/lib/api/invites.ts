/**
 * The open invites of an agent (owner only, decision 038): list, resend (a fresh link by mail;
 * the old one stops working) and revoke. Errors arrive as `ApiError` from `client.ts`.
 */
import { api } from './client.ts';

/** An open invite: not used, not expired; never its token. */
export interface OpenInvite { id: string; email: string; invitedBy: string | null; createdAt: string; expiresAt: string }
/** A resent invite: as listed, with its new link (shown to the owner once). */
export interface ResentInvite extends OpenInvite { token: string; url: string }

const invitesPath = (agentId: string) => `/api/agents/${encodeURIComponent(agentId)}/invites`;
const invitePath = (agentId: string, inviteId: string) => `${invitesPath(agentId)}/${encodeURIComponent(inviteId)}`;

// Untyped until openapi.d.ts is regenerated with these routes (`npm run api:types`).
export const listInvites = async (agentId: string) => (await api.get<{ invites: OpenInvite[] }>(invitesPath(agentId))).invites;
export const resendInvite = (agentId: string, inviteId: string) => api.post<ResentInvite>(`${invitePath(agentId, inviteId)}/resend`);
export const revokeInvite = (agentId: string, inviteId: string) => api.delete(invitePath(agentId, inviteId));
