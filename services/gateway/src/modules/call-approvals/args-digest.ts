import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';

/**
 * What a call approval binds the arguments by (decision 063): the sha256 hex digest of their
 * RFC 8785 (JCS) canonical JSON, so key order and number spelling do not make two equal
 * argument objects differ, and any other change does.
 */
export function argsDigest(args: Record<string, unknown>): string {
  // A tool call's arguments came from JSON, so they always canonicalise; `{}` is a safe floor.
  const canonical = canonicalize(args) ?? '{}';
  return createHash('sha256').update(canonical, 'utf8').digest('hex');
}
