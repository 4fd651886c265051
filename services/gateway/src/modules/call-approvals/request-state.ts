import { z } from 'zod';
import { readSignedPayload, signPayload } from '../signing/signed-payload.ts';

/**
 * Domain label of the `requestState` signature: the server secret keys other HMACs too, so a
 * signature made for this purpose never verifies for another.
 */
const STATE_LABEL = 'portcullis/call-approval-request-state/v1';

/**
 * What the `requestState` of an `input_required` answer carries (decision 063): the approval
 * it waits on and the call it was minted for. It grants nothing by itself (the retried call is
 * judged afresh); it is checked so that a client cannot present state minted for another
 * caller, tool or arguments.
 */
export interface ApprovalRequestState {
  approvalId: string;
  agentId: string;
  memberId: string;
  /** The prefixed tool name as called (`github__issue_write`). */
  name: string;
  argsDigest: string;
  /** Expiry, milliseconds since the epoch: the request's own expiry when minted. */
  exp: number;
}

const stateSchema = z.strictObject({
  approvalId: z.string().uuid(),
  agentId: z.string().uuid(),
  memberId: z.string().uuid(),
  name: z.string().min(1).max(300),
  argsDigest: z.string().regex(/^[0-9a-f]{64}$/),
  exp: z.number().int().positive(),
});

/** Longest `requestState` accepted: well above what `mint` makes, so a huge value is refused unread. */
const MAX_STATE_LENGTH = 2_048;

/** The token of `state` (see `signPayload`). */
export function mintRequestState(secret: string, state: ApprovalRequestState): string {
  return signPayload(secret, STATE_LABEL, stateSchema.parse(state));
}

/**
 * The state a client sent back, when this server minted it and it has not expired; otherwise
 * the reason it is refused. The signature is checked first (in constant time), so nothing in an
 * unsigned payload is believed.
 */
export function readRequestState(secret: string, token: unknown, nowMs: number): { ok: true; state: ApprovalRequestState } | { ok: false; problem: string } {
  const invalid = { ok: false as const, problem: 'requestState was not issued by this server or was altered' };
  if (typeof token !== 'string' || token.length > MAX_STATE_LENGTH) return invalid;
  const parsed = stateSchema.safeParse(readSignedPayload(secret, STATE_LABEL, token));
  if (!parsed.success) return invalid;
  if (parsed.data.exp <= nowMs) return { ok: false, problem: 'requestState has expired; call the tool again without it' };
  return { ok: true, state: parsed.data };
}
