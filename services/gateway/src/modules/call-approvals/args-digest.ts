import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';

/**
 * The RFC 8785 (JCS) canonical JSON of a call's arguments: the bytes a call approval binds
 * (their digest) and seals (decision 067), so key order and number spelling do not make two
 * equal argument objects differ, and any other change does.
 */
export function canonicalArgs(args: Record<string, unknown>): string {
  // A tool call's arguments came from JSON, so they always canonicalise; `{}` is a safe floor.
  return canonicalize(args) ?? '{}';
}

/** sha256 hex of `canonical` (from `canonicalArgs`). */
export const digestOfCanonical = (canonical: string): string => createHash('sha256').update(canonical, 'utf8').digest('hex');

/** What a call approval binds the arguments by (decision 063): the sha256 hex digest of their canonical JSON. */
export function argsDigest(args: Record<string, unknown>): string {
  return digestOfCanonical(canonicalArgs(args));
}
