import type { IncomingMessage } from 'node:http';
import type { OAuthAuthority } from './oauth-authority.ts';
import type { OAuthClient } from './oauth-clients.ts';
import type { OAuthParams } from './oauth-io.ts';

/** An authenticated client, or the RFC 6749 §5.2 error to answer. */
export type ClientAuthentication = { ok: true; client: OAuthClient } | { ok: false; status: 400 | 401; error: 'invalid_request' | 'invalid_client'; description: string };

interface PresentedCredentials {
  clientId: string | undefined;
  secret: string | undefined;
}

type CredentialsRead = { ok: true; credentials: PresentedCredentials } | { ok: false; status: 400 | 401; error: 'invalid_request' | 'invalid_client'; description: string };

function decodeFormComponent(text: string): string | undefined {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return undefined;
  }
}

/**
 * `Authorization: Basic base64(urlencode(id):urlencode(secret))` (RFC 6749 §2.3.1). The
 * sandbox's ids and secrets are base64url, so encoded or not they read the same.
 */
function basicCredentialsOf(header: string): PresentedCredentials | undefined {
  const match = /^Basic +([A-Za-z0-9+/]+=*)\s*$/i.exec(header);
  if (!match) return undefined;
  const decoded = Buffer.from(match[1] as string, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return undefined;
  const clientId = decodeFormComponent(decoded.slice(0, colon));
  const secret = decodeFormComponent(decoded.slice(colon + 1));
  if (clientId === undefined || secret === undefined) return undefined;
  return { clientId, secret };
}

function presentedCredentialsOf(req: IncomingMessage, params: OAuthParams): CredentialsRead {
  const header = req.headers.authorization;
  if (header === undefined || !/^Basic\b/i.test(header)) {
    return { ok: true, credentials: { clientId: params.get('client_id'), secret: params.get('client_secret') } };
  }
  const basic = basicCredentialsOf(header);
  if (!basic) return { ok: false, status: 401, error: 'invalid_client', description: 'The Basic credentials are malformed' };
  // RFC 6749 §2.3: a client uses one authentication method per request.
  if (params.get('client_secret') !== undefined) return { ok: false, status: 400, error: 'invalid_request', description: 'Use one client authentication method: Basic or client_secret in the body' };
  const bodyClientId = params.get('client_id');
  if (bodyClientId !== undefined && bodyClientId !== basic.clientId) return { ok: false, status: 401, error: 'invalid_client', description: 'client_id differs from the Basic credentials' };
  return { ok: true, credentials: basic };
}

/**
 * Authenticates the client of a token or revocation request at connector `connectorKey`:
 * confidential clients by `client_secret_basic` or `client_secret_post` (either, whichever
 * they registered), public clients (`none`) by `client_id` alone. Every failure is
 * `invalid_client` (401) except sending two methods at once (`invalid_request`, 400).
 */
export function authenticateClient(req: IncomingMessage, params: OAuthParams, authority: OAuthAuthority, connectorKey: string): ClientAuthentication {
  const read = presentedCredentialsOf(req, params);
  if (!read.ok) return read;
  const { clientId, secret } = read.credentials;
  if (clientId === undefined) return { ok: false, status: 401, error: 'invalid_client', description: 'Client authentication is required' };
  const client = authority.clientAt(connectorKey, clientId);
  if (!client) return { ok: false, status: 401, error: 'invalid_client', description: 'Unknown client' };
  if (client.authMethod === 'none') {
    if (secret !== undefined && secret !== '') return { ok: false, status: 401, error: 'invalid_client', description: 'A public client has no secret' };
    return { ok: true, client };
  }
  if (secret === undefined) return { ok: false, status: 401, error: 'invalid_client', description: 'The client secret is required' };
  if (!authority.secretMatches(client, secret)) return { ok: false, status: 401, error: 'invalid_client', description: 'The client secret is wrong' };
  return { ok: true, client };
}

/** The `WWW-Authenticate` an `invalid_client` answer carries (RFC 6749 §5.2). */
export function clientChallengeOf(connectorKey: string): Record<string, string> {
  return { 'www-authenticate': `Basic realm="${connectorKey} sandbox"` };
}
