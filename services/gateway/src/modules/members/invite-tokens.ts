import { createHmac, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';

/** How long an invite link is valid (spec part 8). */
export const INVITE_TTL_MS = 7 * 24 * 60 * 60_000;

/**
 * Domain label for the invite signature: the server secret also keys sign-in codes, MFA
 * sealing and more, so an HMAC made for one purpose must never verify for another.
 */
const INVITE_LABEL = 'portcullis/invite-token/v1';

/** What an invite token carries; the `invites` row with `inviteId` makes it single use. */
export interface InvitePayload {
  inviteId: string;
  agentId: string;
  /** The invited address, normalised (see `normaliseEmail`). */
  email: string;
  /** Expiry, milliseconds since the epoch. */
  exp: number;
}

const payloadSchema = z.strictObject({
  inviteId: z.string().uuid(),
  agentId: z.string().uuid(),
  email: z.string().min(1).max(320),
  exp: z.number().int().positive(),
});

/** Why a presented token is refused before the database is asked anything. */
export type InviteTokenProblem =
  /** Not a token we made: malformed, tampered, or signed with another secret. */
  | 'invalid_invite'
  /** A genuine token whose `exp` has passed. */
  | 'invite_expired';

export type InviteTokenCheck = { ok: true; payload: InvitePayload } | { ok: false; problem: InviteTokenProblem };

function signatureOf(secret: string, encodedPayload: string): Buffer {
  const key = createHmac('sha256', secret).update(INVITE_LABEL).digest();
  return createHmac('sha256', key).update(encodedPayload).digest();
}

/**
 * `base64url(JSON payload) + "." + base64url(HMAC-SHA256)` under a key derived from the server
 * secret and a domain label. The token is not secret from its holder (the payload is readable);
 * the signature only proves that this server issued exactly these fields.
 */
export function signInviteToken(secret: string, payload: InvitePayload): string {
  const encoded = Buffer.from(JSON.stringify(payloadSchema.parse(payload))).toString('base64url');
  return `${encoded}.${signatureOf(secret, encoded).toString('base64url')}`;
}

/**
 * Checks the signature (in constant time), then the payload's shape, then its expiry against
 * `nowMs`. The signature is checked first, so nothing in an unsigned payload is ever believed.
 */
export function readInviteToken(secret: string, token: string, nowMs: number): InviteTokenCheck {
  const invalid: InviteTokenCheck = { ok: false, problem: 'invalid_invite' };
  const parts = token.split('.');
  if (parts.length !== 2) return invalid;
  const [encoded, signature] = parts as [string, string];
  if (!/^[A-Za-z0-9_-]+$/.test(encoded) || !/^[A-Za-z0-9_-]{43}$/.test(signature)) return invalid;
  const presented = Buffer.from(signature, 'base64url');
  const expected = signatureOf(secret, encoded);
  if (presented.length !== expected.length || !timingSafeEqual(presented, expected)) return invalid;
  let parsed;
  try {
    parsed = payloadSchema.safeParse(JSON.parse(Buffer.from(encoded, 'base64url').toString('utf8')));
  } catch {
    return invalid;
  }
  if (!parsed.success) return invalid;
  if (parsed.data.exp <= nowMs) return { ok: false, problem: 'invite_expired' };
  return { ok: true, payload: parsed.data };
}
