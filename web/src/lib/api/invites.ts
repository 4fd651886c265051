/**
 * The open invites of an agent (owner only, decision 038): list, resend (a fresh link by mail;
 * the old one stops working) and revoke. Errors arrive as `ApiError` from `client.ts`.
 */
import { call, http, type Answer } from './client.ts';

/** An open invite: not used, not expired; never its token. */
export type OpenInvite = Answer<'/api/agents/{id}/invites'>['invites'][number];
/** A resent invite: as listed, with its new link (shown to the owner once). */
export type ResentInvite = Answer<'/api/agents/{id}/invites/{inviteId}/resend', 'post'>;

const invite = (id: string, inviteId: string) => ({ params: { path: { id, inviteId } } });

export const listInvites = async (id: string) => (await call(http.GET('/api/agents/{id}/invites', { params: { path: { id } } }))).invites;
export const resendInvite = (id: string, inviteId: string) => call(http.POST('/api/agents/{id}/invites/{inviteId}/resend', { ...invite(id, inviteId), body: {} }));
export const revokeInvite = (id: string, inviteId: string) => call(http.DELETE('/api/agents/{id}/invites/{inviteId}', invite(id, inviteId)));
