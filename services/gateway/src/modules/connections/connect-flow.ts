import { createHash, randomBytes } from 'node:crypto';
import { exchangeAuthorization, startAuthorization } from '@modelcontextprotocol/sdk/client/auth.js';
import type { OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { and, eq, gt, lt } from 'drizzle-orm';
import {
  ApiError, getConnector, isolatingFetch, openWithSecret, schema, sealToMember, sealWithSecret,
  type Bus, type ConnectionOAuth, type Database, type OAuthFlowTarget,
} from '@portcullis/core';
import { loadAgentAccess, requireApproved } from '../agents/agent-access.ts';
import { clientInformationOf, type OAuthClientRegistry } from './oauth-client-registry.ts';
import { DiscoveryError, type OAuthServerDiscovery } from './oauth-server-discovery.ts';
import { connectionTokensOf, tokenEndpointMetadata } from './sealed-tokens.ts';

const CODE_VERIFIER_LABEL = 'oauth-code-verifier';
/** How long a started connect flow waits for its callback. */
const FLOW_TTL_MS = 10 * 60_000;

/** What the callback query may carry (RFC 6749 §4.1.2). */
export interface CallbackQuery { state?: string; code?: string; error?: string }

/** A connection just made, for whatever follows (entity harvesting). */
export interface NewConnection { agentId: string; memberId: string; service: string; accessToken: string }

const digestOf = (state: string) => createHash('sha256').update(state).digest('base64url');

/**
 * Members' OAuth connect flow: authorization code with PKCE (S256) and a random single-use
 * `state` bound to the user, agent and connector. `start` discovers the connector's
 * authorization server, picks the client (owner's app, platform app or a dynamic
 * registration) and remembers the flow; `complete` consumes it on the callback, exchanges
 * the code, reads the identity, seals the tokens to the member's vault key and stores the
 * connection.
 */
export function createConnectFlow(deps: {
  db: Database;
  bus: Pick<Bus, 'publishChange'>;
  secret: string;
  discovery: OAuthServerDiscovery;
  clients: OAuthClientRegistry;
  upstreamUrls: Record<string, string>;
  /** `<public URL>/api/oauth/callback`. */
  redirectUri: string;
  /** Where the callback sends the browser afterwards. */
  dashboardUrl: string;
  /** Runs after a connection is stored (harvesting); its failure never fails the connect. */
  afterConnect?: (connection: NewConnection) => Promise<void>;
  fetchFn?: typeof fetch;
  now?: () => number;
}) {
  const { db } = deps;
  const now = deps.now ?? Date.now;
  const fetchFn = deps.fetchFn ?? isolatingFetch;
  const flows = schema.oauthFlows;

  function dashboardRedirect(agentId: string, params: Record<string, string>): string {
    const url = new URL(`${deps.dashboardUrl.replace(/\/$/, '')}/agents/${agentId}/connectors`);
    for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
    return url.toString();
  }

  async function identityOf(target: OAuthFlowTarget, tokens: OAuthTokens): Promise<Record<string, unknown>> {
    if (!target.userinfoEndpoint) return {};
    try {
      const res = await fetchFn(target.userinfoEndpoint, { headers: { authorization: `Bearer ${tokens.access_token}`, accept: 'application/json' } });
      if (!res.ok) return {};
      const info = await res.json() as Record<string, unknown>;
      const login = [info.preferred_username, info.login, info.sub].find((v) => typeof v === 'string' && v.length > 0);
      return {
        ...(login !== undefined ? { login } : {}),
        ...(typeof info.name === 'string' ? { name: info.name } : {}),
        ...(typeof info.email === 'string' ? { email: info.email } : {}),
      };
    } catch {
      return {};
    }
  }

  return {
    /** Starts a flow for the signed-in user; returns the provider URL to send the browser to. */
    async start(userId: string, agentId: string, service: string): Promise<{ authorizeUrl: string }> {
      const access = await loadAgentAccess(db, agentId, userId);
      requireApproved(access);
      const connector = getConnector(service)!;
      if (!access.agent.allowedServices.includes(service)) {
        throw new ApiError('conflict', `${connector.label} is not enabled on this agent; the owner enables it first.`, { reason: 'service_not_enabled' });
      }
      if (!access.membership.vaultPublicKey) {
        throw new ApiError('conflict', 'Generate your member key first: connection tokens are sealed to it.', { reason: 'member_key_required' });
      }
      let server;
      try {
        server = await deps.discovery.find(deps.upstreamUrls[service]!);
      } catch (err) {
        if (err instanceof DiscoveryError) throw new ApiError('unavailable', `${connector.label}'s authorization server cannot be reached or is not usable; try again later.`);
        throw err;
      }
      let client;
      try {
        client = await deps.clients.forConnect(agentId, service, server, deps.redirectUri);
      } catch (err) {
        if (err instanceof ApiError) throw err;
        throw new ApiError('unavailable', `Registering with ${connector.label}'s authorization server failed; try again later.`);
      }
      const state = randomBytes(32).toString('base64url');
      const { authorizationUrl, codeVerifier } = await startAuthorization(server.issuer, {
        metadata: server.metadata,
        clientInformation: clientInformationOf(client),
        redirectUrl: deps.redirectUri,
        state,
        resource: server.resource,
      });
      const target: OAuthFlowTarget = {
        issuer: server.issuer,
        tokenEndpoint: server.metadata.token_endpoint,
        ...(typeof server.metadata.userinfo_endpoint === 'string' ? { userinfoEndpoint: server.metadata.userinfo_endpoint } : {}),
        tokenEndpointAuthMethod: client.authMethod,
        clientSource: client.source,
        clientId: client.clientId,
        resource: server.resource,
        redirectUri: deps.redirectUri,
      };
      await db.delete(flows).where(lt(flows.expiresAt, new Date(now())));
      await db.insert(flows).values({
        stateDigest: digestOf(state), userId, agentId, memberId: access.membership.id, service,
        codeVerifierSealed: sealWithSecret(deps.secret, CODE_VERIFIER_LABEL, codeVerifier),
        target, expiresAt: new Date(now() + FLOW_TTL_MS),
      });
      return { authorizeUrl: authorizationUrl.toString() };
    },

    /**
     * Finishes the flow `query.state` names, for the user who started it; returns where to
     * send the browser. An unknown, expired, reused or foreign state is a 400 and changes nothing.
     */
    async complete(userId: string, query: CallbackQuery): Promise<string> {
      if (!query.state) throw new ApiError('invalid_request', 'The callback has no state.', { field: 'state', in: 'query' });
      if (!query.code && !query.error) throw new ApiError('invalid_request', 'The callback has neither a code nor an error.', { field: 'code', in: 'query' });
      const [flow] = await db.delete(flows)
        .where(and(eq(flows.stateDigest, digestOf(query.state)), eq(flows.userId, userId), gt(flows.expiresAt, new Date(now()))))
        .returning();
      if (!flow) throw new ApiError('invalid_request', 'No pending connect flow matches this state: it is unknown, expired, already used or someone else\'s. Start connecting again.', { field: 'state', in: 'query' });
      const { agentId, service, target } = flow;
      if (query.error) return dashboardRedirect(agentId, { service, connect_error: query.error.slice(0, 64) });

      const oauth: ConnectionOAuth = {
        issuer: target.issuer, tokenEndpoint: target.tokenEndpoint, tokenEndpointAuthMethod: target.tokenEndpointAuthMethod,
        clientSource: target.clientSource, clientId: target.clientId, ...(target.resource ? { resource: target.resource } : {}),
      };
      const client = await deps.clients.forRefresh(agentId, service, oauth);
      if (!client) return dashboardRedirect(agentId, { service, connect_error: 'client_changed' });
      let tokens: OAuthTokens;
      try {
        tokens = await exchangeAuthorization(target.issuer, {
          metadata: tokenEndpointMetadata(oauth),
          clientInformation: clientInformationOf(client),
          authorizationCode: query.code!,
          codeVerifier: openWithSecret(deps.secret, CODE_VERIFIER_LABEL, flow.codeVerifierSealed),
          redirectUri: target.redirectUri,
          ...(target.resource ? { resource: new URL(target.resource) } : {}),
          fetchFn,
        });
      } catch {
        return dashboardRedirect(agentId, { service, connect_error: 'token_exchange_failed' });
      }
      const identityInfo = await identityOf(target, tokens);

      const stored = await db.transaction(async (tx) => {
        // The member row is locked so a concurrent key reset cannot leave tokens sealed to a discarded key.
        const [member] = await tx.select().from(schema.members).where(eq(schema.members.id, flow.memberId)).for('update');
        if (!member || member.status !== 'approved' || !member.vaultPublicKey) return false;
        const sealedTokens = sealToMember(member.vaultPublicKey, JSON.stringify(connectionTokensOf(tokens, now())));
        await tx.insert(schema.connections).values({ memberId: member.id, service, identityInfo, sealedTokens, oauth, status: 'active' })
          .onConflictDoUpdate({
            target: [schema.connections.memberId, schema.connections.service],
            set: { identityInfo, sealedTokens, oauth, status: 'active', updatedAt: new Date(now()) },
          });
        return true;
      });
      if (!stored) return dashboardRedirect(agentId, { service, connect_error: 'membership_changed' });
      deps.bus.publishChange({ kind: 'agent.changed', agentId });
      if (deps.afterConnect) {
        await deps.afterConnect({ agentId, memberId: flow.memberId, service, accessToken: tokens.access_token }).catch(() => undefined);
      }
      return dashboardRedirect(agentId, { connected: service });
    },
  };
}

export type ConnectFlow = ReturnType<typeof createConnectFlow>;
