/**
 * Portcullis as the authorization server of its own `/mcp` (decisions 051, 054): the consent
 * step an MCP client sends its member to, and the grants members and owners can revoke.
 */
import { call, http, type Answer } from './client.ts';

type Item<T> = T extends ReadonlyArray<infer I> ? I : never;

export type ConsentRequest = Answer<'/api/oauth/consent'>;
export type OAuthGrant = Item<Answer<'/api/agents/{id}/oauth-grants'>['grants']>;

/** What the pending request asks for: the client, where it goes back to, the agents to choose from. */
export function readConsent(request: string): Promise<ConsentRequest> {
  return call(http.GET('/api/oauth/consent', { params: { query: { request } } }));
}

/** Lets the client act for the member on `agentId` (the member key proves it once); answers where to send the browser. */
export function approveConsent(request: string, agentId: string, memberKey: string): Promise<{ redirectTo: string }> {
  return call(http.POST('/api/oauth/consent', { body: { request, agentId, memberKey } }));
}

/** Declines: the client is told `access_denied`. */
export function denyConsent(request: string): Promise<{ redirectTo: string }> {
  return call(http.POST('/api/oauth/consent/deny', { body: { request } }));
}

/** The live grants on an agent: all of them for an owner, a member's own otherwise. */
export async function listOAuthGrants(agentId: string): Promise<OAuthGrant[]> {
  return (await call(http.GET('/api/agents/{id}/oauth-grants', { params: { path: { id: agentId } } }))).grants;
}

/** Revokes a grant: the client's tokens stop on every replica at once. */
export async function revokeOAuthGrant(agentId: string, grantId: string): Promise<void> {
  await call(http.DELETE('/api/agents/{id}/oauth-grants/{grantId}', { params: { path: { id: agentId, grantId } } }));
}
