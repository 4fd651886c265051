import { createHash, createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';

/** How long a member has to sign in and consent after the client sent them to `/oauth/authorize`. */
export const REQUEST_LIFETIME_MS = 15 * 60_000;

/**
 * Longest signed request: `/oauth/authorize` refuses a longer one (a long state or redirect URI)
 * and the consent API takes up to this, so whatever authorize sends on can be consented to,
 * and the consent URL stays well inside an HTTP request line.
 */
export const MAX_SIGNED_REQUEST_LENGTH = 8000;

/** An authorization request the SDK's handler validated, waiting for the member's consent. */
export interface PendingAuthorization {
  clientId: string;
  redirectUri: string;
  codeChallenge: string;
  state?: string | undefined;
  resource: string;
  /** Epoch ms after which consent is refused. */
  expiresAt: number;
}

function macKey(secret: string): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, 'portcullis-mcp-oauth-request', 'v1', 32));
}

/**
 * Carries the pending request to the consent page and back in the URL, signed under a key
 * derived from the server secret, so an unauthenticated `/oauth/authorize` writes nothing to
 * the database. Nothing in it is secret (the code challenge is public by design).
 */
export function signAuthorizationRequest(secret: string, request: PendingAuthorization): string {
  const body = Buffer.from(JSON.stringify(request)).toString('base64url');
  return `${body}.${createHmac('sha256', macKey(secret)).update(body).digest('base64url')}`;
}

/** The request a signed value carries, or undefined when it is damaged, forged or expired. */
export function readAuthorizationRequest(secret: string, signed: string, now: number): PendingAuthorization | undefined {
  const [body, mac, extra] = signed.split('.');
  if (!body || !mac || extra !== undefined) return undefined;
  const expected = createHmac('sha256', macKey(secret)).update(body).digest();
  const given = Buffer.from(mac, 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
  try {
    const request = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as PendingAuthorization;
    return request.expiresAt > now ? request : undefined;
  } catch {
    return undefined;
  }
}

/**
 * What identifies a signed request once it is answered: the digest of its signed body (the MAC
 * covers the body exactly, while base64url decoding of the MAC tolerates variants), so the
 * same request cannot be consented to twice in another spelling.
 */
export function authorizationRequestDigest(signed: string): string {
  return createHash('sha256').update(signed.split('.')[0] ?? '').digest('hex');
}
