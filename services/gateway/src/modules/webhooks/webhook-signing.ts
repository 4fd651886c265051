import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { Verification, WebhookHeaders } from './webhook-types.ts';

export const VERIFIED: Verification = { ok: true };

export function refused(failure: string): Verification {
  return { ok: false, failure };
}

/** Hex HMAC-SHA256 under `secret` (its UTF-8 bytes) of the parts, concatenated as bytes. */
export function hmacSha256Hex(secret: string, ...parts: Array<string | Buffer>): string {
  const hmac = createHmac('sha256', secret);
  for (const part of parts) hmac.update(part);
  return hmac.digest('hex');
}

/**
 * Equality whose timing depends on neither content nor length: both sides are hashed first,
 * so `timingSafeEqual` always compares 32 bytes and a short guess learns nothing either.
 */
export function constantTimeEqual(presented: string, expected: string): boolean {
  const digest = (value: string) => createHash('sha256').update(value, 'utf8').digest();
  return timingSafeEqual(digest(presented), digest(expected));
}

/** One header's value; absent, empty or repeated (an array) counts as missing. */
export function singleHeader(headers: WebhookHeaders, name: string): string | undefined {
  const value = headers[name.toLowerCase()];
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/** Whether a Unix time in seconds is within `toleranceSeconds` of our clock, either way. */
export function withinWindow(unixSeconds: number, nowMs: number, toleranceSeconds: number): boolean {
  return Math.abs(nowMs / 1000 - unixSeconds) <= toleranceSeconds;
}

/** A Unix time in whole seconds as providers send it in headers; anything else is undefined. */
export function unixSecondsOf(value: string | undefined): number | undefined {
  return value !== undefined && /^\d{1,12}$/.test(value) ? Number(value) : undefined;
}
