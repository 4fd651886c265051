import { randomUUID } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { CustomOAuthError, InvalidClientMetadataError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type { OAuthRegisteredClientsStore } from '@modelcontextprotocol/sdk/server/auth/clients.js';
import type { OAuthClientInformationFull } from '@modelcontextprotocol/sdk/shared/auth.js';
import { schema, type Database } from '@portcullis/core';
import { CONTROL_CHARACTER, MAX_REDIRECT_URIS, redirectUriProblem } from './redirect-uris.ts';

const { mcpOAuthClients } = schema;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const MAX_CLIENT_NAME_LENGTH = 100;
/** A UTF-16 surrogate not part of a pair (with the `u` flag a pair is one code point, not `Cs`). */
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * A client's self-chosen name as shown at consent: control, invisible and direction-changing
 * characters (Unicode Cc, Cf, Zl, Zp, lone surrogates: a U+202E would turn the rest of the consent text around)
 * out, bounded, never empty.
 */
function displayName(name: string | undefined): string {
  const clean = (name ?? '').replace(/[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}]/gu, ' ').replace(/\s+/g, ' ').trim();
  // Cut by code point: half a surrogate pair is no text Postgres stores.
  return clean ? Array.from(clean).slice(0, MAX_CLIENT_NAME_LENGTH).join('').trim() : 'Unnamed client';
}

/**
 * Clients registered with RFC 7591 dynamic registration. Every client is public: it proves
 * itself with PKCE, never with a secret, so whatever authentication method a client asks
 * for, it is registered as `none` and no secret exists to leak (decision 051).
 */
export function createAgentClients(db: Database): OAuthRegisteredClientsStore {
  return {
    async getClient(clientId) {
      if (!UUID.test(clientId)) return undefined;
      const [row] = await db.select().from(mcpOAuthClients).where(eq(mcpOAuthClients.id, clientId)).limit(1);
      return row ? (row.metadata as OAuthClientInformationFull) : undefined;
    },

    async registerClient(client) {
      // Half a surrogate pair is no text Postgres stores: refused as the client's mistake, not a 500.
      const texts = [...client.redirect_uris, client.client_uri, client.software_id, client.software_version];
      if (texts.some((text) => typeof text === 'string' && LONE_SURROGATE.test(text))) {
        throw new InvalidClientMetadataError('Client metadata must be well-formed Unicode text.');
      }
      // A NUL is no text Postgres stores either (it was a 500); control characters have no place in these fields.
      if ([client.client_uri, client.software_id, client.software_version].some((text) => typeof text === 'string' && CONTROL_CHARACTER.test(text))) {
        throw new InvalidClientMetadataError('Client metadata must not contain control characters.');
      }
      if (client.redirect_uris.length === 0) throw new CustomOAuthError('invalid_redirect_uri', 'Register at least one redirect URI.');
      if (client.redirect_uris.length > MAX_REDIRECT_URIS) throw new CustomOAuthError('invalid_redirect_uri', `Register at most ${MAX_REDIRECT_URIS} redirect URIs.`);
      for (const uri of client.redirect_uris) {
        const problem = redirectUriProblem(uri);
        if (problem) throw new CustomOAuthError('invalid_redirect_uri', `Refused: ${problem}.`);
      }
      const grantTypes = client.grant_types ?? ['authorization_code', 'refresh_token'];
      if (grantTypes.some((g) => g !== 'authorization_code' && g !== 'refresh_token')) {
        throw new InvalidClientMetadataError('Only the authorization_code and refresh_token grant types are supported.');
      }
      const id = (client as Partial<OAuthClientInformationFull>).client_id ?? randomUUID();
      const registered: OAuthClientInformationFull = {
        client_id: id,
        client_id_issued_at: Math.floor(Date.now() / 1000),
        client_name: displayName(client.client_name),
        redirect_uris: client.redirect_uris,
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
        ...(client.client_uri && client.client_uri.length <= 2000 ? { client_uri: client.client_uri } : {}),
        ...(client.software_id && client.software_id.length <= 200 ? { software_id: client.software_id } : {}),
        ...(client.software_version && client.software_version.length <= 100 ? { software_version: client.software_version } : {}),
      };
      await db.insert(mcpOAuthClients).values({ id, name: registered.client_name!, redirectUris: registered.redirect_uris, metadata: registered });
      return registered;
    },
  };
}
