import type { Response } from 'express';
import { InvalidRequestError, InvalidTargetError, InvalidTokenError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type { OAuthServerProvider } from '@modelcontextprotocol/sdk/server/auth/provider.js';
import type { OAuthRegisteredClientsStore } from '@modelcontextprotocol/sdk/server/auth/clients.js';
import { MAX_SIGNED_REQUEST_LENGTH, REQUEST_LIFETIME_MS, signAuthorizationRequest } from './authorization-request.ts';
import type { AgentTokenResolver } from './agent-token-resolver.ts';
import type { GrantStore } from './grant-store.ts';

/** Longest `state` a client may send (it travels in URLs twice). */
const MAX_STATE_LENGTH = 1000;

/** Where this deployment's pieces live, from its public URL. */
export function oauthUrlsOf(publicUrl: string) {
  const base = publicUrl.replace(/\/+$/, '');
  return {
    issuer: base,
    /** The one resource tokens are issued for (RFC 8707). */
    resource: new URL(`${base}/mcp`).href,
    resourceMetadata: `${base}/.well-known/oauth-protected-resource/mcp`,
    authorize: `${base}/oauth/authorize`,
    token: `${base}/oauth/token`,
    register: `${base}/oauth/register`,
    revoke: `${base}/oauth/revoke`,
    consentPage: `${base}/oauth/consent`,
  };
}

/**
 * The MCP SDK's `OAuthServerProvider` over Portcullis's grants (decision 050): the SDK's
 * handlers validate requests, PKCE (S256 only) and client identity, and answer errors in the
 * OAuth format; this decides what they mean here. Authorization sends the member to the
 * dashboard's consent page with the validated request signed into the URL.
 */
export function createAgentOAuthProvider(deps: {
  clients: OAuthRegisteredClientsStore; grants: GrantStore; resolver: AgentTokenResolver; secret: string; publicUrl: string; now?: () => number;
}): OAuthServerProvider {
  const urls = oauthUrlsOf(deps.publicUrl);
  const now = deps.now ?? Date.now;
  return {
    get clientsStore() { return deps.clients; },

    async authorize(client, params, res: Response) {
      const resource = params.resource?.href ?? urls.resource;
      if (resource !== urls.resource) throw new InvalidTargetError(`This authorization server issues tokens for ${urls.resource} only.`);
      if (!/^[A-Za-z0-9_-]{43}$/.test(params.codeChallenge)) throw new InvalidRequestError('code_challenge must be a base64url SHA-256 digest (43 characters).');
      if (params.state !== undefined && params.state.length > MAX_STATE_LENGTH) throw new InvalidRequestError(`state is longer than ${MAX_STATE_LENGTH} characters.`);
      const signed = signAuthorizationRequest(deps.secret, {
        clientId: client.client_id, redirectUri: params.redirectUri, codeChallenge: params.codeChallenge, state: params.state, resource, expiresAt: now() + REQUEST_LIFETIME_MS,
      });
      if (signed.length > MAX_SIGNED_REQUEST_LENGTH) throw new InvalidRequestError('The authorization request is too large: shorten state or redirect_uri.');
      res.redirect(302, `${urls.consentPage}?request=${encodeURIComponent(signed)}`);
    },

    challengeForAuthorizationCode: (client, code) => deps.grants.challengeOf(client.client_id, code),

    exchangeAuthorizationCode: (client, code, _verifier, redirectUri, resource) => deps.grants.exchangeCode(client.client_id, code, redirectUri, resource),

    exchangeRefreshToken: (client, refreshToken, _scopes, resource) => deps.grants.refresh(client.client_id, refreshToken, resource),

    async verifyAccessToken(token) {
      const context = await deps.resolver.resolve(token);
      if (!context?.oauth) throw new InvalidTokenError('The access token is not valid.');
      return { token, clientId: context.oauth.clientId, scopes: [], resource: new URL(urls.resource) };
    },

    revokeToken: (client, request) => deps.grants.revokeByToken(client.client_id, request.token),
  };
}
