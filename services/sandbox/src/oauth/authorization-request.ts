import type { OAuthAuthority } from './oauth-authority.ts';
import type { OAuthClient } from './oauth-clients.ts';
import type { OAuthParams } from './oauth-io.ts';

/** A valid authorization request (RFC 6749 §4.1.1 with PKCE, RFC 7636, and RFC 8707 `resource`). */
export interface AuthorizationRequest {
  client: OAuthClient;
  /** One of the client's registered redirect URIs, exactly. */
  redirectUri: string;
  state?: string;
  /** S256 challenge: 43 base64url characters. */
  codeChallenge: string;
  /** Accepted and carried along; the sandbox has no scopes. */
  scope?: string;
  /** This connector's MCP endpoint, when the client named it. */
  resource?: string;
}

/**
 * How to answer an authorization request. `refuse`: the client or redirect URI cannot be
 * trusted, so the user agent gets a page and is never redirected (RFC 6749 §4.1.2.1).
 * `redirect_error`: the redirect URI is verified, so the error goes back to the client.
 */
export type AuthorizationRequestParse =
  | { kind: 'valid'; request: AuthorizationRequest }
  | { kind: 'refuse'; message: string }
  | { kind: 'redirect_error'; redirectUri: string; state?: string; error: 'invalid_request' | 'unsupported_response_type' | 'invalid_target'; description: string };

/** What parsing needs: the authority (client ids), the connector and its MCP endpoint URL. */
export interface AuthorizationRequestContext {
  authority: OAuthAuthority;
  connectorKey: string;
  /** The only `resource` this authorization server issues tokens for. */
  resource: string;
}

const S256_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;

/**
 * Checks the parameters of `GET` (query) or `POST` (form) `/<connector>/oauth/authorize`:
 * first `client_id` and `redirect_uri` (which must equal a registered URI exactly, with no
 * loopback port relaxation), then the rest.
 */
export function parseAuthorizationRequest(params: OAuthParams, context: AuthorizationRequestContext): AuthorizationRequestParse {
  if (params.duplicates.includes('client_id') || params.duplicates.includes('redirect_uri')) return { kind: 'refuse', message: 'client_id and redirect_uri must each be given once.' };
  const clientId = params.get('client_id');
  if (clientId === undefined) return { kind: 'refuse', message: 'The request names no client (client_id is missing).' };
  const client = context.authority.clientAt(context.connectorKey, clientId);
  if (!client) return { kind: 'refuse', message: 'The client is not registered with this service.' };
  const redirectUri = params.get('redirect_uri');
  if (redirectUri === undefined) return { kind: 'refuse', message: 'redirect_uri is missing.' };
  if (!client.redirectUris.includes(redirectUri)) return { kind: 'refuse', message: 'redirect_uri is not one the client registered.' };

  const state = params.get('state');
  const redirectError = (error: 'invalid_request' | 'unsupported_response_type' | 'invalid_target', description: string): AuthorizationRequestParse => ({
    kind: 'redirect_error',
    redirectUri,
    ...(state !== undefined ? { state } : {}),
    error,
    description,
  });
  if (params.duplicates.length > 0) return redirectError('invalid_request', `Parameters given more than once: ${params.duplicates.join(', ')}`);
  const responseType = params.get('response_type');
  if (responseType === undefined) return redirectError('invalid_request', 'response_type is missing');
  if (responseType !== 'code') return redirectError('unsupported_response_type', 'Only response_type=code is supported');
  const codeChallenge = params.get('code_challenge');
  if (codeChallenge === undefined) return redirectError('invalid_request', 'code_challenge is required (PKCE)');
  if (params.get('code_challenge_method') !== 'S256') return redirectError('invalid_request', 'code_challenge_method must be S256');
  if (!S256_CHALLENGE.test(codeChallenge)) return redirectError('invalid_request', 'code_challenge must be 43 base64url characters (S256)');
  const resource = params.get('resource');
  if (resource !== undefined && resource !== context.resource) return redirectError('invalid_target', `resource must be ${context.resource}`);
  const scope = params.get('scope');
  return {
    kind: 'valid',
    request: { client, redirectUri, ...(state !== undefined ? { state } : {}), codeChallenge, ...(scope !== undefined ? { scope } : {}), ...(resource !== undefined ? { resource } : {}) },
  };
}

/** The parameters a consent form carries in hidden inputs, so its POST repeats the request. */
export function hiddenFieldsOf(request: AuthorizationRequest): Array<[name: string, value: string]> {
  return [
    ['response_type', 'code'],
    ['client_id', request.client.clientId],
    ['redirect_uri', request.redirectUri],
    ...(request.state !== undefined ? [['state', request.state] as [string, string]] : []),
    ['code_challenge', request.codeChallenge],
    ['code_challenge_method', 'S256'],
    ...(request.scope !== undefined ? [['scope', request.scope] as [string, string]] : []),
    ...(request.resource !== undefined ? [['resource', request.resource] as [string, string]] : []),
  ];
}

/** `redirectUri` with `params` added to its query (its own query is kept). */
export function redirectWith(redirectUri: string, params: Record<string, string | undefined>): string {
  const url = new URL(redirectUri);
  for (const [name, value] of Object.entries(params)) if (value !== undefined) url.searchParams.set(name, value);
  return url.href;
}
