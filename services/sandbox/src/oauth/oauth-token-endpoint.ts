import type { IncomingMessage, ServerResponse } from 'node:http';
import { authenticateClient, clientChallengeOf } from './client-authentication.ts';
import type { TokenGrantOutcome } from './oauth-authority.ts';
import type { OAuthEndpointContext } from './oauth-context.ts';
import { readForm, sendMethodNotAllowed, sendNoStoreJson, sendOAuthError, type OAuthParams } from './oauth-io.ts';
import { oauthUrlsOf } from './oauth-urls.ts';

type GrantRequest = { ok: true; outcome: TokenGrantOutcome } | { ok: false; status: 400; error: 'invalid_request' | 'unsupported_grant_type' | 'invalid_target'; description: string };

function missing(names: string[], params: OAuthParams): string[] {
  return names.filter((name) => params.get(name) === undefined);
}

/**
 * `POST /<connector>/oauth/token` (form-encoded): `authorization_code` (code, redirect_uri,
 * code_verifier; PKCE S256) and `refresh_token` (rotating). The client authenticates first
 * (`client-authentication.ts`). Answers `{access_token, token_type, expires_in,
 * refresh_token}` with `Cache-Control: no-store`, or an RFC 6749 §5.2 error:
 * `invalid_request`, `invalid_grant`, `unsupported_grant_type`, `invalid_target` → 400;
 * `invalid_client` → 401.
 */
export async function handleToken(req: IncomingMessage, res: ServerResponse, context: OAuthEndpointContext): Promise<void> {
  if (req.method !== 'POST') return sendMethodNotAllowed(res, 'POST');
  const form = await readForm(req);
  if (!form.ok) return sendOAuthError(res, form.status, 'invalid_request', form.description, form.headers);
  const { params } = form;
  if (params.duplicates.length > 0) return sendOAuthError(res, 400, 'invalid_request', `Parameters given more than once: ${params.duplicates.join(', ')}`);
  const { authority, connector } = context;
  const auth = authenticateClient(req, params, authority, connector.key);
  if (!auth.ok) return sendOAuthError(res, auth.status, auth.error, auth.description, auth.error === 'invalid_client' ? clientChallengeOf(connector.key) : {});

  const grant = ((): GrantRequest => {
    const grantType = params.get('grant_type');
    const resource = params.get('resource');
    const expectedResource = oauthUrlsOf(context.base, connector.key).resource;
    if (grantType === undefined) return { ok: false, status: 400, error: 'invalid_request', description: 'grant_type is missing' };
    if (grantType !== 'authorization_code' && grantType !== 'refresh_token') return { ok: false, status: 400, error: 'unsupported_grant_type', description: 'grant_type must be authorization_code or refresh_token' };
    const required = grantType === 'authorization_code' ? ['code', 'redirect_uri', 'code_verifier'] : ['refresh_token'];
    const absent = missing(required, params);
    if (absent.length > 0) return { ok: false, status: 400, error: 'invalid_request', description: `Missing: ${absent.join(', ')}` };
    if (resource !== undefined && resource !== expectedResource) return { ok: false, status: 400, error: 'invalid_target', description: `resource must be ${expectedResource}` };
    if (grantType === 'refresh_token') return { ok: true, outcome: authority.refresh(auth.client, params.get('refresh_token') as string) };
    return {
      ok: true,
      outcome: authority.exchangeCode(auth.client, {
        code: params.get('code') as string,
        redirectUri: params.get('redirect_uri') as string,
        codeVerifier: params.get('code_verifier') as string,
        ...(resource !== undefined ? { resource } : {}),
      }),
    };
  })();
  if (!grant.ok) return sendOAuthError(res, grant.status, grant.error, grant.description);
  if (!grant.outcome.ok) return sendOAuthError(res, 400, 'invalid_grant', grant.outcome.description);
  sendNoStoreJson(res, 200, grant.outcome.tokens);
}
