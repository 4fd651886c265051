import type { IncomingMessage, ServerResponse } from 'node:http';
import { sendJson } from '../http/http-io.ts';
import { handleAuthorize } from './authorize-endpoint.ts';
import type { OAuthEndpointContext } from './oauth-context.ts';
import { authorizationServerMetadataOf, protectedResourceMetadataOf, sendMetadata } from './oauth-metadata.ts';
import { handleToken } from './oauth-token-endpoint.ts';
import { handleRegister } from './registration-endpoint.ts';
import { handleRevoke } from './revocation-endpoint.ts';
import { handleUserinfo } from './userinfo-endpoint.ts';

type OAuthHandler = (req: IncomingMessage, res: ServerResponse, context: OAuthEndpointContext) => void | Promise<void>;

/** The endpoints under `/<connector>/oauth/`, by their last path segment. */
const OAUTH_ENDPOINTS: ReadonlyMap<string, OAuthHandler> = new Map<string, OAuthHandler>([
  ['authorize', handleAuthorize],
  ['token', handleToken],
  ['register', handleRegister],
  ['revoke', handleRevoke],
  ['userinfo', handleUserinfo],
]);

/**
 * The handler of `/<connector>/oauth/<endpoint>`, if there is one. Registration exists only
 * at `managed` connectors; `own_app` ones answer 404 there, as their metadata says.
 */
export function oauthEndpointOf(context: Pick<OAuthEndpointContext, 'connector'>, endpoint: string): OAuthHandler | undefined {
  if (endpoint === 'register' && context.connector.oauth !== 'managed') return undefined;
  return OAUTH_ENDPOINTS.get(endpoint);
}

/** The two metadata documents a connector publishes under `/.well-known/`. */
export type MetadataKind = 'oauth-protected-resource' | 'oauth-authorization-server';

/**
 * `GET /.well-known/oauth-protected-resource/<key>/mcp` (RFC 9728) and
 * `GET /.well-known/oauth-authorization-server/<key>` (RFC 8414, path inserted). Readable
 * cross-origin; `OPTIONS` answers the preflight a browser sends for `MCP-Protocol-Version`.
 */
export function handleMetadata(req: IncomingMessage, res: ServerResponse, kind: MetadataKind, context: Omit<OAuthEndpointContext, 'authority'>): void {
  if (req.method === 'OPTIONS') {
    res.writeHead(204, { 'access-control-allow-origin': '*', 'access-control-allow-methods': 'GET', 'access-control-allow-headers': '*', 'content-length': 0 });
    res.end();
    return;
  }
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    sendJson(res, 405, { error: 'invalid_request', error_description: 'Use GET' }, { allow: 'GET' });
    return;
  }
  sendMetadata(res, kind === 'oauth-protected-resource' ? protectedResourceMetadataOf(context.base, context.connector) : authorizationServerMetadataOf(context.base, context.connector));
}
