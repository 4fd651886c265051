import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';
import type { OAuthAuthority } from '../oauth/oauth-authority.ts';
import { clientNameSchema, redirectUrisSchema } from '../oauth/oauth-clients.ts';
import { sendJson } from './http-io.ts';
import { loginSchema, readControlRequest } from './token-endpoint.ts';

/**
 * The test controls of the sandbox's OAuth server, `POST /_sandbox/<connector>/<control>`
 * with a JSON body: what happens at a real provider outside any OAuth request (an owner
 * creating an app, a member removing it, time passing). Validation and errors as at
 * `/_sandbox/<connector>/tokens`.
 */

const MAX_CONTROL_BYTES = 64 * 1024;

/** `{redirect_uris, name?}` of an owner's OAuth app. */
export const appRegistrationSchema = z.strictObject({ redirect_uris: redirectUrisSchema, name: clientNameSchema.optional() });

/**
 * Registers an owner's app: a confidential client (`client_secret_basic`, `_post` accepted
 * too) with exactly these redirect URIs.
 */
export function registerOwnerApp(authority: OAuthAuthority, connectorKey: string, app: z.output<typeof appRegistrationSchema>): { clientId: string; clientSecret: string } {
  const { client, clientSecret } = authority.registerClient({ connectorKey, kind: 'app', redirectUris: app.redirect_uris, authMethod: 'client_secret_basic', ...(app.name !== undefined ? { name: app.name } : {}) });
  if (clientSecret === undefined) throw new Error('a confidential client always has a secret');
  return { clientId: client.clientId, clientSecret };
}

const memberSchema = z.strictObject({ login: loginSchema });

/** The routes, by the last path segment. */
export type SandboxControl = 'apps' | 'revoke-grants' | 'expire-tokens';

export const SANDBOX_CONTROLS: readonly SandboxControl[] = ['apps', 'revoke-grants', 'expire-tokens'];

/**
 * - `apps` `{redirect_uris, name?}` → 201 `{client_id, client_secret}`: an owner's "OAuth
 *   app", created as on the provider's developer site; confidential, and the only kind of
 *   client an `own_app` connector has.
 * - `revoke-grants` `{login}` → 200 `{revoked: true}`: the member removed the app at the
 *   provider; every grant of theirs at the connector so far stops working.
 * - `expire-tokens` `{login}` → 200 `{expired: true}`: every OAuth access token of the member
 *   at the connector issued so far counts as expired; refresh tokens keep working.
 */
export async function handleSandboxControl(req: IncomingMessage, res: ServerResponse, control: SandboxControl, connectorKey: string, authority: OAuthAuthority): Promise<void> {
  if (control === 'apps') {
    const app = await readControlRequest(req, res, appRegistrationSchema, MAX_CONTROL_BYTES);
    if (app === undefined) return;
    const { clientId, clientSecret } = registerOwnerApp(authority, connectorKey, app);
    sendJson(res, 201, { client_id: clientId, client_secret: clientSecret }, { 'cache-control': 'no-store' });
    return;
  }
  const member = await readControlRequest(req, res, memberSchema);
  if (member === undefined) return;
  if (control === 'revoke-grants') {
    authority.revokeGrantsOf(connectorKey, member.login);
    sendJson(res, 200, { revoked: true });
  } else {
    authority.expireAccessTokensOf(connectorKey, member.login);
    sendJson(res, 200, { expired: true });
  }
}
