import type { IncomingMessage, ServerResponse } from 'node:http';
import { authenticateClient, clientChallengeOf } from './client-authentication.ts';
import type { OAuthEndpointContext } from './oauth-context.ts';
import { readForm, sendMethodNotAllowed, sendOAuthError } from './oauth-io.ts';

/**
 * `POST /<connector>/oauth/revoke` (RFC 7009, form-encoded `token`, client authentication as
 * at the token endpoint): revokes the whole grant the token belongs to, its refresh token
 * and its access tokens. Always 200 with an empty body once the client authenticated, also
 * for tokens that are unknown, already revoked or another client's.
 */
export async function handleRevoke(req: IncomingMessage, res: ServerResponse, context: OAuthEndpointContext): Promise<void> {
  if (req.method !== 'POST') return sendMethodNotAllowed(res, 'POST');
  const form = await readForm(req);
  if (!form.ok) return sendOAuthError(res, form.status, 'invalid_request', form.description, form.headers);
  const { params } = form;
  if (params.duplicates.length > 0) return sendOAuthError(res, 400, 'invalid_request', `Parameters given more than once: ${params.duplicates.join(', ')}`);
  const { authority, connector } = context;
  const auth = authenticateClient(req, params, authority, connector.key);
  if (!auth.ok) return sendOAuthError(res, auth.status, auth.error, auth.description, auth.error === 'invalid_client' ? clientChallengeOf(connector.key) : {});
  const token = params.get('token');
  if (token === undefined) return sendOAuthError(res, 400, 'invalid_request', 'token is missing');
  authority.revokeToken(auth.client, token);
  res.writeHead(200, { 'cache-control': 'no-store', 'content-length': 0 });
  res.end();
}
