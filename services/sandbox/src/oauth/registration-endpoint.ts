import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';
import { problemsOf, readJsonRequest } from '../http/json-request.ts';
import { CLIENT_AUTH_METHODS, MAX_CLIENT_NAME_LENGTH, redirectUrisSchema, type ClientAuthMethod } from './oauth-clients.ts';
import type { OAuthEndpointContext } from './oauth-context.ts';
import { MAX_OAUTH_BODY_BYTES, sendMethodNotAllowed, sendNoStoreJson, sendOAuthError } from './oauth-io.ts';

const GRANT_TYPES = ['authorization_code', 'refresh_token'] as const;

/**
 * RFC 7591 client metadata the sandbox reads; other fields are ignored, as §2 asks.
 * `redirect_uris` apart, so that its problems can answer `invalid_redirect_uri`.
 */
const clientMetadataSchema = z.object({
  token_endpoint_auth_method: z.enum(CLIENT_AUTH_METHODS as [ClientAuthMethod, ...ClientAuthMethod[]]).default('client_secret_basic'),
  grant_types: z
    .array(z.enum(GRANT_TYPES))
    .refine((types) => types.includes('authorization_code'), { message: 'must include authorization_code' })
    .optional(),
  response_types: z.array(z.literal('code')).min(1).optional(),
  client_name: z.string().trim().max(MAX_CLIENT_NAME_LENGTH).optional(),
});

const redirectUrisFieldSchema = z.object({ redirect_uris: redirectUrisSchema });

/**
 * `POST /<connector>/oauth/register` (RFC 7591), only at `managed` connectors (the router
 * answers 404 at `own_app` ones). Requires 1–10 http(s) `redirect_uris`; accepts
 * `token_endpoint_auth_method` `client_secret_basic` (the default), `client_secret_post` or
 * `none` (a public client, no secret). → 201 with the client's id, secret and metadata;
 * 400 `invalid_redirect_uri` or `invalid_client_metadata` otherwise.
 */
export async function handleRegister(req: IncomingMessage, res: ServerResponse, context: OAuthEndpointContext): Promise<void> {
  if (req.method !== 'POST') return sendMethodNotAllowed(res, 'POST');
  const read = await readJsonRequest(req, z.record(z.string(), z.unknown()), MAX_OAUTH_BODY_BYTES);
  if (!read.ok) return sendOAuthError(res, read.status === 413 ? 413 : 400, 'invalid_client_metadata', read.description, read.headers);
  const uris = redirectUrisFieldSchema.safeParse(read.data);
  if (!uris.success) return sendOAuthError(res, 400, 'invalid_redirect_uri', problemsOf(uris.error));
  const metadata = clientMetadataSchema.safeParse(read.data);
  if (!metadata.success) return sendOAuthError(res, 400, 'invalid_client_metadata', problemsOf(metadata.error));

  const authMethod = metadata.data.token_endpoint_auth_method;
  const name = metadata.data.client_name !== undefined && metadata.data.client_name !== '' ? metadata.data.client_name : undefined;
  const { client, clientSecret } = context.authority.registerClient({ connectorKey: context.connector.key, kind: 'dynamic', redirectUris: uris.data.redirect_uris, authMethod, ...(name !== undefined ? { name } : {}) });
  sendNoStoreJson(res, 201, {
    client_id: client.clientId,
    ...(clientSecret !== undefined ? { client_secret: clientSecret } : {}),
    client_id_issued_at: client.issuedAt,
    client_secret_expires_at: 0,
    redirect_uris: client.redirectUris,
    token_endpoint_auth_method: authMethod,
    grant_types: [...GRANT_TYPES],
    response_types: ['code'],
    ...(name !== undefined ? { client_name: name } : {}),
  });
}
