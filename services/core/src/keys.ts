import { createHash, randomBytes } from 'node:crypto';

const MEMBER_KEY_PREFIX = 'pcm_';

/** A fresh member key: `pcm_` + 256 random bits in base64url (43 characters). */
export function generateMemberKey(): string {
  return MEMBER_KEY_PREFIX + randomBytes(32).toString('base64url');
}

/** True when `value` has the shape of a member key; says nothing about validity. */
export function looksLikeMemberKey(value: string): boolean {
  return value.startsWith(MEMBER_KEY_PREFIX) && value.length === MEMBER_KEY_PREFIX.length + 43;
}

/** The only form of a key that is ever stored: its SHA-256 digest, hex. */
export function digestKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

/** The part of a key a person may see again later. */
export function displaySuffixOf(key: string): string {
  return key.slice(-4);
}
