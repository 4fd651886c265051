import type { KeyObject } from 'node:crypto';
import { refreshAuthorization } from '@modelcontextprotocol/sdk/client/auth.js';
import { OAuthError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type { OAuthMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { eq } from 'drizzle-orm';
import { isolatingFetch, openSealed, schema, sealToMember, VaultError, type Bus, type ConnectionOAuth, type Database } from '@portcullis/core';
import { UpstreamError } from '../../clients/upstream-pool.ts';
import { clientInformationOf, type OAuthClientRegistry } from './oauth-client-registry.ts';

/** What a connection's sealed box holds. */
export interface ConnectionTokens {
  accessToken: string;
  refreshToken?: string;
  /** Milliseconds since the epoch; absent when the provider gave no lifetime. */
  expiresAt?: number;
}

/** The connection cannot be used until the member connects again; the message says so. */
export class ReauthRequired extends Error {
  override readonly name = 'ReauthRequired';
}

/** The connection as a `/mcp` call sees it (a row of the caller's context). */
export interface SealedConnection {
  id: string;
  service: string;
  sealedTokens: string;
  status: 'active' | 'needs_reauth';
  updatedAt: Date;
}

/** The caller a refresh acts for: the agent (for the owner's app) and the unwrapped vault key. */
export interface TokenHolder { agentId: string; vaultPrivateKey: KeyObject | undefined }

/** Refresh this long before the provider's expiry, so a call never starts with a dying token. */
const EXPIRY_SKEW_MS = 60_000;
/** Token endpoint answers meaning the grant is gone for good (RFC 6749 §5.2). */
const DEAD_GRANT = new Set(['invalid_grant', 'invalid_client', 'unauthorized_client']);

/** Just enough authorization-server metadata for the SDK's token requests. */
export function tokenEndpointMetadata(oauth: ConnectionOAuth): OAuthMetadata {
  return {
    issuer: oauth.issuer,
    authorization_endpoint: oauth.issuer,
    token_endpoint: oauth.tokenEndpoint,
    response_types_supported: ['code'],
    token_endpoint_auth_methods_supported: [oauth.tokenEndpointAuthMethod],
  };
}

/** The sealed form of a token response, with the lifetime turned into an instant. */
export function connectionTokensOf(tokens: OAuthTokens, at: number, previous?: ConnectionTokens): ConnectionTokens {
  const refreshToken = tokens.refresh_token ?? previous?.refreshToken;
  return {
    accessToken: tokens.access_token,
    ...(refreshToken ? { refreshToken } : {}),
    ...(tokens.expires_in !== undefined ? { expiresAt: at + tokens.expires_in * 1000 } : {}),
  };
}

const NEEDS_REAUTH = 'Its authorization was revoked or expired, or it was sealed to a member key that has since been replaced without the old one (then reset the lost key first).';
const UNREADABLE = 'This connection was made under an earlier member key and cannot be read; reset the lost key and reconnect the service.';

/**
 * Opens and refreshes members' connection tokens inside their `/mcp` calls — the only place
 * the member key, and so the vault's private key, is present. A refresh locks the connection
 * row, so replicas racing to refresh one connection make one token request between them and
 * the others pick up its result; new tokens are sealed again to the member's public key. A
 * grant the provider no longer honours marks the connection `needs_reauth`.
 */
export function createSealedTokens(deps: {
  db: Database;
  bus: Pick<Bus, 'publishChange'>;
  clients: Pick<OAuthClientRegistry, 'forRefresh'>;
  fetchFn?: typeof fetch;
  now?: () => number;
}) {
  const { db } = deps;
  const now = deps.now ?? Date.now;
  const fetchFn = deps.fetchFn ?? isolatingFetch;
  /** Tokens this process refreshed, until the caller's context reloads with the new row. */
  const refreshed = new Map<string, { tokens: ConnectionTokens; updatedAt: number }>();
  const needsReauth = new Set<string>();
  const inFlight = new Map<string, Promise<ConnectionTokens>>();
  const opened = new WeakMap<KeyObject, Map<string, ConnectionTokens>>();

  function open(privateKey: KeyObject | undefined, sealed: string): ConnectionTokens {
    if (!privateKey) throw new ReauthRequired(UNREADABLE);
    try {
      return JSON.parse(openSealed(privateKey, sealed)) as ConnectionTokens;
    } catch (err) {
      if (err instanceof VaultError) throw new ReauthRequired(UNREADABLE);
      throw err;
    }
  }

  async function refreshNow(holder: TokenHolder, connection: SealedConnection, stale: ConnectionTokens): Promise<ConnectionTokens> {
    const outcome = await db.transaction(async (tx) => {
      const [row] = await tx.select({ connection: schema.connections, publicKey: schema.members.vaultPublicKey })
        .from(schema.connections)
        .innerJoin(schema.members, eq(schema.members.id, schema.connections.memberId))
        .where(eq(schema.connections.id, connection.id))
        .for('update', { of: schema.connections });
      if (!row) return { reauth: 'The connection was removed; connect the service again.' } as const;
      if (row.connection.status === 'needs_reauth') return { reauth: NEEDS_REAUTH } as const;
      const latest = open(holder.vaultPrivateKey, row.connection.sealedTokens);
      // Another call (or replica) refreshed while this one waited for the lock: use its tokens.
      if (latest.accessToken !== stale.accessToken && !isExpiring(latest)) return { tokens: latest, updatedAt: row.connection.updatedAt } as const;

      const markReauth = async (reason: string) => {
        await tx.update(schema.connections).set({ status: 'needs_reauth', updatedAt: new Date(now()) }).where(eq(schema.connections.id, connection.id));
        return { reauth: reason, marked: true } as const;
      };
      const oauth = row.connection.oauth;
      if (!latest.refreshToken || !oauth || !row.publicKey) return markReauth('The provider rejected the token and it cannot be refreshed.');
      const client = await deps.clients.forRefresh(holder.agentId, connection.service, oauth);
      if (!client) return markReauth('The OAuth app this connection was made with is no longer configured.');
      let response: OAuthTokens;
      try {
        response = await refreshAuthorization(oauth.issuer, {
          metadata: tokenEndpointMetadata(oauth),
          clientInformation: clientInformationOf(client),
          refreshToken: latest.refreshToken,
          ...(oauth.resource ? { resource: new URL(oauth.resource) } : {}),
          fetchFn,
        });
      } catch (err) {
        if (err instanceof OAuthError && DEAD_GRANT.has(err.errorCode)) return markReauth('The provider no longer honours this connection\'s grant.');
        throw new UpstreamError('The connector\'s authorization server cannot be reached to refresh the token.', 'unreachable', { cause: err });
      }
      const tokens = connectionTokensOf(response, now(), latest);
      const updatedAt = new Date(now());
      await tx.update(schema.connections)
        .set({ sealedTokens: sealToMember(row.publicKey, JSON.stringify(tokens)), updatedAt })
        .where(eq(schema.connections.id, connection.id));
      return { tokens, updatedAt } as const;
    });
    if ('reauth' in outcome) {
      needsReauth.add(connection.id);
      if ('marked' in outcome) deps.bus.publishChange({ kind: 'agent.changed', agentId: holder.agentId });
      throw new ReauthRequired(outcome.reauth);
    }
    refreshed.set(connection.id, { tokens: outcome.tokens, updatedAt: outcome.updatedAt.getTime() });
    // Other replicas reload the member's context, and with it the new sealed tokens.
    deps.bus.publishChange({ kind: 'agent.changed', agentId: holder.agentId });
    return outcome.tokens;
  }

  function isExpiring(tokens: ConnectionTokens): boolean {
    return tokens.expiresAt !== undefined && tokens.expiresAt - EXPIRY_SKEW_MS <= now();
  }

  return {
    isExpiring,

    /** The connection's current tokens; throws ReauthRequired when they cannot be used. */
    current(holder: TokenHolder, connection: SealedConnection): ConnectionTokens {
      const mine = refreshed.get(connection.id);
      if (connection.status === 'needs_reauth' || (needsReauth.has(connection.id) && !(connection.updatedAt.getTime() > (mine?.updatedAt ?? 0)))) {
        throw new ReauthRequired(NEEDS_REAUTH);
      }
      needsReauth.delete(connection.id);
      if (mine && mine.updatedAt >= connection.updatedAt.getTime()) return mine.tokens;
      refreshed.delete(connection.id);
      if (!holder.vaultPrivateKey) throw new ReauthRequired(UNREADABLE);
      let cache = opened.get(holder.vaultPrivateKey);
      if (!cache) { cache = new Map(); opened.set(holder.vaultPrivateKey, cache); }
      const cacheKey = `${connection.id}:${connection.updatedAt.getTime()}`;
      let tokens = cache.get(cacheKey);
      if (!tokens) { tokens = open(holder.vaultPrivateKey, connection.sealedTokens); cache.set(cacheKey, tokens); }
      return tokens;
    },

    /** Marks a connection unusable until the member connects again (the provider refuses even fresh tokens). */
    async markNeedsReauth(holder: TokenHolder, connection: SealedConnection): Promise<void> {
      needsReauth.add(connection.id);
      refreshed.delete(connection.id);
      await db.update(schema.connections).set({ status: 'needs_reauth', updatedAt: new Date(now()) }).where(eq(schema.connections.id, connection.id));
      deps.bus.publishChange({ kind: 'agent.changed', agentId: holder.agentId });
    },

    /** New tokens for a connection whose `stale` tokens expired or were refused; one refresh per connection at a time. */
    refresh(holder: TokenHolder, connection: SealedConnection, stale: ConnectionTokens): Promise<ConnectionTokens> {
      let pending = inFlight.get(connection.id);
      if (!pending) {
        pending = refreshNow(holder, connection, stale).finally(() => inFlight.delete(connection.id));
        inFlight.set(connection.id, pending);
      }
      return pending;
    },
  };
}

export type SealedTokens = ReturnType<typeof createSealedTokens>;
