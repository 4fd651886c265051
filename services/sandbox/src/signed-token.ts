import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';

/**
 * The one self-verifying format the sandbox uses for everything it must recognise without
 * stored state (access tokens, refresh tokens, OAuth client ids):
 * `<prefix><base64url JSON claims>.<base64url HMAC-SHA256 of the payload text>`.
 * Each kind has its own prefix and its own key, so none opens as another.
 */

/**
 * A 32-byte HMAC key derived (HKDF-SHA256, salt `portcullis`) from the server secret under
 * `label`, so the secret itself never signs anything and each purpose has its own key.
 */
export function deriveSandboxKey(secret: string, label: string): Buffer {
  if (secret.length === 0) throw new Error('the sandbox needs a non-empty secret');
  return Buffer.from(hkdfSync('sha256', secret, 'portcullis', label, 32));
}

function signatureOf(key: Buffer, payload: string): Buffer {
  return createHmac('sha256', key).update(payload).digest();
}

/** Signs `claims` (any JSON object) into `<prefix><payload>.<signature>`. */
export function signClaims(prefix: string, key: Buffer, claims: object): string {
  const payload = Buffer.from(JSON.stringify(claims)).toString('base64url');
  return `${prefix}${payload}.${signatureOf(key, payload).toString('base64url')}`;
}

/**
 * The claims object of a token `signClaims(prefix, key, …)` made; undefined for anything
 * else (another prefix, key or kind, a changed payload, malformed text, a non-object).
 */
export function openSignedClaims(prefix: string, key: Buffer, token: string): Record<string, unknown> | undefined {
  if (!token.startsWith(prefix)) return undefined;
  const dot = token.indexOf('.', prefix.length);
  if (dot < 0) return undefined;
  const payload = token.slice(prefix.length, dot);
  // Compared as text, so exactly one spelling of the signature is accepted.
  const presented = Buffer.from(token.slice(dot + 1));
  const expected = Buffer.from(signatureOf(key, payload).toString('base64url'));
  if (presented.length !== expected.length || !timingSafeEqual(presented, expected)) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return undefined;
  return parsed as Record<string, unknown>;
}

/** Compares two texts in constant time (for their length). */
export function textsMatch(presented: string, expected: string): boolean {
  const a = Buffer.from(presented);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}
