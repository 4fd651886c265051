import { createHmac, randomBytes } from 'node:crypto';
import { z } from 'zod';
import { openSignedClaims, signClaims, textsMatch } from '../signed-token.ts';
import type { OAuthKeys } from './oauth-keys.ts';

/**
 * OAuth clients of the sandbox, registered without any stored state: the client id is
 * signed and carries everything the server must know about the client (connector, kind,
 * redirect URIs, authentication method, name), and the client secret is an HMAC of the
 * client id. A client therefore survives a restart with the same secret, as it would in a
 * provider's database, and never opens under another secret.
 */

const CLIENT_ID_PREFIX = 'sbc_';
const CLIENT_SECRET_PREFIX = 'sbs_';

/** `dynamic`: registered through RFC 7591; `app`: an owner's "OAuth app" from the test controls. */
export type ClientKind = 'dynamic' | 'app';

/** How a client authenticates at the token and revocation endpoints; `none` is a public client. */
export type ClientAuthMethod = 'none' | 'client_secret_basic' | 'client_secret_post';

export const CLIENT_AUTH_METHODS: readonly ClientAuthMethod[] = ['client_secret_basic', 'client_secret_post', 'none'];

/** A verified client, read back from its id. */
export interface OAuthClient {
  readonly clientId: string;
  /** The connector key the client was registered at; it is unknown at every other. */
  readonly connectorKey: string;
  readonly kind: ClientKind;
  readonly redirectUris: readonly string[];
  readonly authMethod: ClientAuthMethod;
  readonly name?: string;
  /** Seconds since the epoch. */
  readonly issuedAt: number;
}

/** What registering a client needs. */
export interface ClientRegistration {
  connectorKey: string;
  kind: ClientKind;
  redirectUris: readonly string[];
  authMethod: ClientAuthMethod;
  name?: string;
}

/** A new client and, unless it is public, its secret. */
export interface RegisteredClient {
  client: OAuthClient;
  clientSecret?: string;
}

const MAX_REDIRECT_URIS = 10;
const MAX_REDIRECT_URI_LENGTH = 2000;
export const MAX_CLIENT_NAME_LENGTH = 200;

/** True for an absolute http(s) URL without a fragment (RFC 6749 §3.1.2), the only redirect URIs accepted. */
export function isRedirectUri(value: string): boolean {
  if (value.length > MAX_REDIRECT_URI_LENGTH || !URL.canParse(value)) return false;
  const url = new URL(value);
  return (url.protocol === 'http:' || url.protocol === 'https:') && url.hash === '' && !value.includes('#');
}

/** 1 to 10 distinct http(s) redirect URIs; each message names what is wrong. */
export const redirectUrisSchema = z
  .array(z.string().refine(isRedirectUri, { message: `must be an absolute http(s) URL without a fragment, at most ${MAX_REDIRECT_URI_LENGTH} characters` }))
  .min(1, { message: 'at least one redirect URI is required' })
  .max(MAX_REDIRECT_URIS, { message: `at most ${MAX_REDIRECT_URIS} redirect URIs` })
  .transform((uris) => [...new Set(uris)]);

/** A client's display name: trimmed, 1 to 200 characters. */
export const clientNameSchema = z.string().trim().min(1).max(MAX_CLIENT_NAME_LENGTH);

function secretOf(keys: OAuthKeys, clientId: string): string {
  return CLIENT_SECRET_PREFIX + createHmac('sha256', keys.clientSecret).update(clientId).digest('base64url');
}

/**
 * Registers a client: signs its id (with a random part, so two registrations never share an
 * id) and derives its secret. Validation of the input is the caller's.
 */
export function registerClient(keys: OAuthKeys, registration: ClientRegistration, now = Date.now()): RegisteredClient {
  const issuedAt = Math.floor(now / 1000);
  const claims = {
    svc: registration.connectorKey,
    kind: registration.kind,
    uris: registration.redirectUris,
    auth: registration.authMethod,
    ...(registration.name !== undefined ? { name: registration.name } : {}),
    iat: issuedAt,
    rnd: randomBytes(12).toString('base64url'),
  };
  const clientId = signClaims(CLIENT_ID_PREFIX, keys.clientId, claims);
  const client: OAuthClient = {
    clientId,
    connectorKey: registration.connectorKey,
    kind: registration.kind,
    redirectUris: [...registration.redirectUris],
    authMethod: registration.authMethod,
    ...(registration.name !== undefined ? { name: registration.name } : {}),
    issuedAt,
  };
  return registration.authMethod === 'none' ? { client } : { client, clientSecret: secretOf(keys, clientId) };
}

const clientClaimsSchema = z.object({
  svc: z.string(),
  kind: z.enum(['dynamic', 'app']),
  uris: z.array(z.string()).min(1),
  auth: z.enum(['none', 'client_secret_basic', 'client_secret_post']),
  name: z.string().optional(),
  iat: z.number(),
});

/** The client a client id names, if the id was signed with these keys; undefined for anything else. */
export function verifyClientId(keys: OAuthKeys, clientId: string): OAuthClient | undefined {
  const opened = openSignedClaims(CLIENT_ID_PREFIX, keys.clientId, clientId);
  const claims = opened && clientClaimsSchema.safeParse(opened);
  if (!claims?.success) return undefined;
  const { svc, kind, uris, auth, name, iat } = claims.data;
  return { clientId, connectorKey: svc, kind, redirectUris: uris, authMethod: auth, ...(name !== undefined ? { name } : {}), issuedAt: iat };
}

/** Whether `presented` is the secret of a confidential client (constant time). */
export function clientSecretMatches(keys: OAuthKeys, client: OAuthClient, presented: string): boolean {
  if (client.authMethod === 'none') return false;
  return textsMatch(presented, secretOf(keys, client.clientId));
}
