import { z } from 'zod';
import { ApiError } from '@portcullis/core';

/**
 * Text copied from a payload into the database: Postgres `text` and `jsonb` refuse NUL, so a
 * NUL must be a 400 here rather than a 500 at insert time.
 */
export const payloadText = z.string().max(2000).regex(/^[^\u0000]*$/, 'must not contain NUL characters');

/** A provider's identifier of an entity (`C0001`, `cus_…`, `org/name`). */
export const providerId = payloadText.min(1, 'must not be empty').max(500);

/**
 * Parses a (verified) payload against a schema; a mismatch is 400 `invalid_request` naming
 * the first failing field. The message names the field, never the values.
 */
export function parsePayload<T extends z.ZodType>(schema: T, payload: unknown, what: string): z.infer<T> {
  const parsed = schema.safeParse(payload);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const field = issue.path.map(String).join('.') || 'body';
  throw new ApiError('invalid_request', `Malformed ${what} payload at "${field}": ${issue.message}`, { field, in: 'body' });
}

/** Only the attributes whose value the payload actually carried (undefined ones are dropped). */
export function definedAttributes(attributes: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(attributes).filter(([, value]) => value !== undefined));
}
