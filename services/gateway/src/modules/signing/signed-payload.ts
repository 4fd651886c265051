import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * `base64url(JSON payload) + "." + base64url(HMAC-SHA256)` under a key derived from the server
 * secret and a domain `label` (the secret keys other HMACs too, so a signature made for one
 * purpose never verifies for another). The payload is readable by its holder; the signature
 * only proves that this server issued exactly these fields.
 */
export function signPayload(secret: string, label: string, payload: unknown): string {
  const encoded = Buffer.from(JSON.stringify(payload)).toString('base64url');
  return `${encoded}.${signatureOf(secret, label, encoded).toString('base64url')}`;
}

/**
 * The JSON payload of a token `signPayload` made with the same secret and label; undefined for
 * anything else (malformed, altered, another secret or label). The signature is checked first,
 * in constant time, so nothing in an unsigned payload is believed.
 */
export function readSignedPayload(secret: string, label: string, token: string): unknown {
  const parts = token.split('.');
  if (parts.length !== 2) return undefined;
  const [encoded, signature] = parts as [string, string];
  if (!/^[A-Za-z0-9_-]+$/.test(encoded) || !/^[A-Za-z0-9_-]{43}$/.test(signature)) return undefined;
  const presented = Buffer.from(signature, 'base64url');
  const expected = signatureOf(secret, label, encoded);
  if (presented.length !== expected.length || !timingSafeEqual(presented, expected)) return undefined;
  try {
    return JSON.parse(Buffer.from(encoded, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
}

function signatureOf(secret: string, label: string, encoded: string): Buffer {
  const key = createHmac('sha256', secret).update(label).digest();
  return createHmac('sha256', key).update(encoded).digest();
}
