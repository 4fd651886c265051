import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { and, desc, eq, isNull } from 'drizzle-orm';
import { ApiError, schema, type Database } from '@portcullis/core';
import type { AuthService } from '../modules/auth/auth-service.ts';
import { agentIdParams, loadAgentAccess } from '../modules/agents/agent-access.ts';
import { requireUser } from '../plugins/session-auth.ts';
import { authorizationRequestDigest, MAX_SIGNED_REQUEST_LENGTH, readAuthorizationRequest, type PendingAuthorization } from './authorization-request.ts';
import type { GrantStore } from './grant-store.ts';
import { withIssuer } from './redirect-uris.ts';

const { agents, mcpOAuthClients: clients, mcpOAuthGrants: grants, memberKeys, members } = schema;

const signedRequest = z.string().min(1).max(MAX_SIGNED_REQUEST_LENGTH);
const consentQuery = z.strictObject({ request: signedRequest });
const approveBody = z.strictObject({ request: signedRequest, agentId: z.string().uuid('must be a UUID'), memberKey: z.string().min(1).max(100) });
const denyBody = z.strictObject({ request: signedRequest });
const grantParams = z.strictObject({ id: z.string().uuid('must be a UUID'), grantId: z.string().uuid('must be a UUID') });

const consentAnswer = z.object({
  client: z.object({ id: z.string(), name: z.string(), redirectHost: z.string().describe('Where the browser goes back to after consent') }),
  resource: z.string().describe('The MCP endpoint the tokens are for'),
  agents: z.array(z.object({ id: z.string(), name: z.string(), hasKey: z.boolean().describe('Consent needs the member key of this agent') }))
    .describe('Agents the signed-in user is an approved member of'),
  expiresAt: z.string().describe('ISO 8601: consent after this is refused; start again from the client'),
});
const redirectAnswer = z.object({ redirectTo: z.string().describe('Send the browser here: back to the client') });
const grantSchema = z.object({
  id: z.string(), clientId: z.string(), clientName: z.string(), redirectHosts: z.array(z.string()),
  memberId: z.string(), memberEmail: z.string(),
  createdAt: z.string().describe('ISO 8601'), lastUsedAt: z.string().nullable().describe('ISO 8601; null before the first call'),
});
const grantsAnswer = z.object({ grants: z.array(grantSchema) });

function hostOf(uri: string): string {
  try { return new URL(uri).host; } catch { return uri; }
}

/**
 * The consent step of Portcullis's authorization server (decision 051) and the grants it made
 * (decision 054). Consent needs a dashboard session (the dashboard's own sign-in, MFA
 * included) and the member key of the chosen agent, once. Owners list and revoke every grant
 * on their agent; members their own; anyone else gets the agent's usual 404.
 */
export async function oauthConsentRoutes(fastify: FastifyInstance, options: { db: Database; auth: AuthService; grants: GrantStore; secret: string; issuer: string; now?: () => number }) {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const onRequest = requireUser(options.auth);
  const now = options.now ?? Date.now;
  const tags = ['oauth'];

  async function pending(signed: string): Promise<{ request: PendingAuthorization; client: typeof clients.$inferSelect }> {
    const request = readAuthorizationRequest(options.secret, signed, now());
    if (!request) throw new ApiError('invalid_request', 'This authorization request expired or is damaged: start the sign-in again from your MCP client.', { reason: 'request_expired' });
    const [client] = await options.db.select().from(clients).where(eq(clients.id, request.clientId)).limit(1);
    if (!client) throw new ApiError('invalid_request', 'The client of this request is no longer registered: start again from your MCP client.', { reason: 'request_expired' });
    return { request, client };
  }

  function back(request: PendingAuthorization, params: Record<string, string>): { redirectTo: string } {
    const url = new URL(request.redirectUri);
    for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
    if (request.state !== undefined) url.searchParams.set('state', request.state);
    return { redirectTo: withIssuer(url.href, options.issuer) };
  }

  app.get('/api/oauth/consent', { schema: { tags, querystring: consentQuery, response: { 200: consentAnswer } }, onRequest }, async (request) => {
    const { request: pendingRequest, client } = await pending(request.query.request);
    const rows = await options.db
      .select({ id: agents.id, name: agents.name, keyId: memberKeys.id })
      .from(members)
      .innerJoin(agents, eq(agents.id, members.agentId))
      .leftJoin(memberKeys, and(eq(memberKeys.memberId, members.id), isNull(memberKeys.revokedAt)))
      .where(and(eq(members.userId, request.user!.id), eq(members.status, 'approved')))
      .orderBy(agents.name);
    return {
      client: { id: client.id, name: client.name, redirectHost: hostOf(pendingRequest.redirectUri) },
      resource: pendingRequest.resource,
      agents: rows.map((r) => ({ id: r.id, name: r.name, hasKey: r.keyId !== null })),
      expiresAt: new Date(pendingRequest.expiresAt).toISOString(),
    };
  });

  app.post('/api/oauth/consent', { schema: { tags, body: approveBody, response: { 200: redirectAnswer } }, onRequest }, async (request) => {
    const { request: pendingRequest } = await pending(request.body.request);
    const answered = { digest: authorizationRequestDigest(request.body.request), expiresAt: pendingRequest.expiresAt };
    const code = await options.grants.consent({ request: pendingRequest, answered, userId: request.user!.id, agentId: request.body.agentId, memberKey: request.body.memberKey });
    return back(pendingRequest, { code });
  });

  app.post('/api/oauth/consent/deny', { schema: { tags, body: denyBody, response: { 200: redirectAnswer } }, onRequest }, async (request) => {
    const { request: pendingRequest } = await pending(request.body.request);
    await options.grants.decline({ digest: authorizationRequestDigest(request.body.request), expiresAt: pendingRequest.expiresAt });
    return back(pendingRequest, { error: 'access_denied', error_description: 'The member declined the request.' });
  });

  app.get('/api/agents/:id/oauth-grants', { schema: { tags, params: agentIdParams, response: { 200: grantsAnswer } }, onRequest }, async (request) => {
    const access = await loadAgentAccess(options.db, request.params.id, request.user!.id);
    const rows = await options.db
      .select({ grant: grants, clientName: clients.name, redirectUris: clients.redirectUris, memberEmail: members.email })
      .from(grants)
      .innerJoin(clients, eq(clients.id, grants.clientId))
      .innerJoin(members, eq(members.id, grants.memberId))
      .where(and(eq(grants.agentId, access.agent.id), options.grants.liveGrantCondition(), access.isOwner ? undefined : eq(grants.memberId, access.membership.id)))
      .orderBy(desc(grants.createdAt))
      .limit(500);
    return {
      grants: rows.map((r) => ({
        id: r.grant.id, clientId: r.grant.clientId, clientName: r.clientName, redirectHosts: [...new Set(r.redirectUris.map(hostOf))],
        memberId: r.grant.memberId, memberEmail: r.memberEmail,
        createdAt: r.grant.createdAt.toISOString(), lastUsedAt: r.grant.lastUsedAt?.toISOString() ?? null,
      })),
    };
  });

  app.delete('/api/agents/:id/oauth-grants/:grantId', { schema: { tags, params: grantParams }, onRequest }, async (request, reply) => {
    const access = await loadAgentAccess(options.db, request.params.id, request.user!.id);
    const [grant] = await options.db.select({ memberId: grants.memberId }).from(grants)
      .where(and(eq(grants.id, request.params.grantId), eq(grants.agentId, access.agent.id), isNull(grants.revokedAt))).limit(1);
    // Another member's grant looks like one that does not exist.
    if (!grant || (!access.isOwner && grant.memberId !== access.membership.id)) throw new ApiError('not_found', 'Grant not found.');
    await options.grants.revokeGrant(request.params.grantId);
    return reply.code(204).send();
  });
}
