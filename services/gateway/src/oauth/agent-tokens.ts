import { randomBytes } from 'node:crypto';
import type { schema } from '@portcullis/core';

export type AgentTokenKind = schema.McpOAuthSecretKind;

/**
 * The opaque values Portcullis's authorization server hands out (decision 052): a prefix that
 * says what it is, then 256 random bits in base64url. Only their SHA-256 digest is stored (as
 * member keys: `digestKey`), and each one is also the key the member's vault key is wrapped
 * under for it, so the holder of the value, and nobody else, can open the member's connections.
 */
const PREFIXES: Record<AgentTokenKind, string> = { code: 'pcc_', access: 'pco_', refresh: 'pcr_' };

/** Lifetimes: a code is exchanged at once, an access token lasts an hour, a refresh token rotates. */
export const LIFETIME_MS: Record<AgentTokenKind, number> = {
  code: 2 * 60_000,
  access: 60 * 60_000,
  refresh: 30 * 24 * 60 * 60_000,
};

/** A fresh code, access token or refresh token. */
export function generateAgentToken(kind: AgentTokenKind): string {
  return PREFIXES[kind] + randomBytes(32).toString('base64url');
}

/** True when `value` has the shape of `kind`; says nothing about validity. */
export function looksLikeAgentToken(kind: AgentTokenKind, value: string): boolean {
  return value.startsWith(PREFIXES[kind]) && value.length === PREFIXES[kind].length + 43 && /^[A-Za-z0-9_-]+$/.test(value.slice(4));
}
