import type { IncomingMessage, ServerResponse } from 'node:http';
import { authenticateBearer, sendBearerChallenge } from './bearer-authentication.ts';
import type { OAuthEndpointContext } from './oauth-context.ts';
import { sendMethodNotAllowed, sendNoStoreJson } from './oauth-io.ts';

/**
 * `GET /<connector>/oauth/userinfo` with `Authorization: Bearer <access token>` →
 * `{sub, preferred_username, name?}`: the member as typed on the consent page (what a
 * connection flow shows as "connected as …"). 401 with `WWW-Authenticate` for a token that
 * is missing, invalid, expired or revoked, as at the MCP endpoint.
 */
export function handleUserinfo(req: IncomingMessage, res: ServerResponse, context: OAuthEndpointContext): void {
  if (req.method !== 'GET') return sendMethodNotAllowed(res, 'GET');
  const auth = authenticateBearer(req, context.authority, context.connector.key);
  if (!auth.ok) return sendBearerChallenge(res, auth.problem);
  const { login, name } = auth.claims;
  sendNoStoreJson(res, 200, { sub: login, preferred_username: login, ...(name !== undefined ? { name } : {}) });
}
