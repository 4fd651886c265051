import { registerClient } from '@modelcontextprotocol/sdk/client/auth.js';
import type { OAuthClientInformationFull } from '@modelcontextprotocol/sdk/shared/auth.js';
import { and, eq } from 'drizzle-orm';
import { ApiError, getConnector, isolatingFetch, openWithSecret, schema, sealWithSecret, type ConnectionOAuth, type Database } from '@portcullis/core';
import type { CredentialsService } from '../connectors/credentials-service.ts';
import type { OAuthServer } from './oauth-server-discovery.ts';

const REGISTERED_SECRET_LABEL = 'oauth-registered-client-secret';

/** The client the gateway acts as towards one authorization server. */
export interface OAuthClient {
  source: ConnectionOAuth['clientSource'];
  clientId: string;
  clientSecret?: string;
  /** `client_secret_basic`, `client_secret_post` or `none`. */
  authMethod: string;
}

/** An operator-configured OAuth app for a managed connector (`OAUTH_<KEY>_CLIENT_ID` / `_SECRET`). */
export interface PlatformApp { clientId: string; clientSecret?: string }

/** The SDK's view of a client, with the auth method pinned so the token request uses exactly it. */
export function clientInformationOf(client: OAuthClient): OAuthClientInformationFull {
  return {
    client_id: client.clientId,
    ...(client.clientSecret !== undefined ? { client_secret: client.clientSecret } : {}),
    token_endpoint_auth_method: client.authMethod,
    redirect_uris: [],
  };
}

function secretAuthMethod(server: OAuthServer): string {
  const supported = server.metadata.token_endpoint_auth_methods_supported ?? ['client_secret_basic'];
  return supported.includes('client_secret_basic') || !supported.includes('client_secret_post') ? 'client_secret_basic' : 'client_secret_post';
}

/**
 * Decides which OAuth client a connection uses: the owner's app for `own_app` connectors
 * (none configured → 409), the operator's platform app for a `managed` connector when one
 * is configured, else a client this deployment registered dynamically (RFC 7591) with the
 * connector's authorization server — once per (issuer, redirect URI), stored for reuse.
 */
export function createOAuthClientRegistry(deps: {
  db: Database;
  secret: string;
  credentials: Pick<CredentialsService, 'open'>;
  platformApps: Record<string, PlatformApp>;
  fetchFn?: typeof fetch;
}) {
  const { db, secret } = deps;
  const fetchFn = deps.fetchFn ?? isolatingFetch;
  const table = schema.oauthClients;
  const registering = new Map<string, Promise<OAuthClient>>();

  async function storedRegistration(issuer: string, where: { redirectUri?: string; clientId?: string }): Promise<OAuthClient | undefined> {
    const [row] = await db.select().from(table).where(and(
      eq(table.issuer, issuer),
      where.redirectUri !== undefined ? eq(table.redirectUri, where.redirectUri) : undefined,
      where.clientId !== undefined ? eq(table.clientId, where.clientId) : undefined,
    )).limit(1);
    if (!row) return undefined;
    return {
      source: 'registered',
      clientId: row.clientId,
      ...(row.clientSecretSealed !== null ? { clientSecret: openWithSecret(secret, REGISTERED_SECRET_LABEL, row.clientSecretSealed) } : {}),
      authMethod: row.tokenEndpointAuthMethod,
    };
  }

  async function register(service: string, server: OAuthServer, redirectUri: string): Promise<OAuthClient> {
    const existing = await storedRegistration(server.issuer, { redirectUri });
    if (existing) return existing;
    if (!server.metadata.registration_endpoint) {
      throw new ApiError('conflict', `${getConnector(service)!.label} does not allow dynamic client registration; the operator must configure OAUTH_${service.toUpperCase()}_CLIENT_ID and OAUTH_${service.toUpperCase()}_CLIENT_SECRET.`, { reason: 'platform_app_missing' });
    }
    const supported = server.metadata.token_endpoint_auth_methods_supported ?? ['client_secret_basic'];
    const requested = supported.includes('client_secret_basic') ? 'client_secret_basic' : supported.includes('client_secret_post') ? 'client_secret_post' : 'none';
    const info = await registerClient(server.issuer, {
      metadata: server.metadata,
      clientMetadata: {
        client_name: 'Portcullis',
        redirect_uris: [redirectUri],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: requested,
      },
      fetchFn,
    });
    const authMethod = info.token_endpoint_auth_method ?? (info.client_secret ? 'client_secret_basic' : 'none');
    // Two replicas registering at once: the first row stored wins and both use it.
    await db.insert(table).values({
      service, issuer: server.issuer, redirectUri, clientId: info.client_id,
      clientSecretSealed: info.client_secret ? sealWithSecret(secret, REGISTERED_SECRET_LABEL, info.client_secret) : null,
      tokenEndpointAuthMethod: authMethod,
    }).onConflictDoNothing();
    return (await storedRegistration(server.issuer, { redirectUri }))!;
  }

  return {
    /** The client to start a connect flow with. */
    async forConnect(agentId: string, service: string, server: OAuthServer, redirectUri: string): Promise<OAuthClient> {
      const connector = getConnector(service)!;
      if (connector.oauth === 'own_app') {
        const credentials = await deps.credentials.open(agentId, service);
        if (!credentials) {
          throw new ApiError('conflict', `${connector.label} uses the agent's own OAuth app: the owner must set its client ID and secret (PUT /api/agents/${agentId}/services/${service}/credentials) before members can connect.`, { reason: 'credentials_missing' });
        }
        return { source: 'own_app', clientId: credentials.clientId, clientSecret: credentials.clientSecret, authMethod: secretAuthMethod(server) };
      }
      const platform = deps.platformApps[service];
      if (platform) {
        return { source: 'platform', clientId: platform.clientId, ...(platform.clientSecret ? { clientSecret: platform.clientSecret } : {}), authMethod: platform.clientSecret ? secretAuthMethod(server) : 'none' };
      }
      const key = `${server.issuer} ${redirectUri}`;
      let pending = registering.get(key);
      if (!pending) {
        pending = register(service, server, redirectUri).finally(() => registering.delete(key));
        registering.set(key, pending);
      }
      return pending;
    },

    /** The client a stored connection refreshes with; undefined when it no longer exists (credentials replaced). */
    async forRefresh(agentId: string, service: string, oauth: ConnectionOAuth): Promise<OAuthClient | undefined> {
      switch (oauth.clientSource) {
        case 'own_app': {
          const credentials = await deps.credentials.open(agentId, service);
          if (!credentials || credentials.clientId !== oauth.clientId) return undefined;
          return { source: 'own_app', clientId: credentials.clientId, clientSecret: credentials.clientSecret, authMethod: oauth.tokenEndpointAuthMethod };
        }
        case 'platform': {
          const platform = deps.platformApps[service];
          if (!platform || platform.clientId !== oauth.clientId) return undefined;
          return { source: 'platform', clientId: platform.clientId, ...(platform.clientSecret ? { clientSecret: platform.clientSecret } : {}), authMethod: oauth.tokenEndpointAuthMethod };
        }
        case 'registered':
          return storedRegistration(oauth.issuer, { clientId: oauth.clientId });
      }
    },
  };
}

export type OAuthClientRegistry = ReturnType<typeof createOAuthClientRegistry>;
