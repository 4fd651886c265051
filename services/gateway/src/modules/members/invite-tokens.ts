import { z } from 'zod';
import { readSignedPayload, signPayload } from '../signing/signed-payload.ts';

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

/** The token of `payload` (see `signPayload`). */
export function signInviteToken(secret: string, payload: InvitePayload): string {
  return signPayload(secret, INVITE_LABEL, payloadSchema.parse(payload));
}

/**
 * Checks the signature (in constant time), then the payload's shape, then its expiry against
 * `nowMs`. The signature is checked first, so nothing in an unsigned payload is ever believed.
 */
export function readInviteToken(secret: string, token: string, nowMs: number): InviteTokenCheck {
  const invalid: InviteTokenCheck = { ok: false, problem: 'invalid_invite' };
  const parsed = payloadSchema.safeParse(readSignedPayload(secret, INVITE_LABEL, token));
  if (!parsed.success) return invalid;
  if (parsed.data.exp <= nowMs) return { ok: false, problem: 'invite_expired' };
  return { ok: true, payload: parsed.data };
}
