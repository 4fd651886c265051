import { deriveSandboxKey } from '../signed-token.ts';

/**
 * The keys of the sandbox's OAuth server, each derived from the server secret under its own
 * HKDF label, so a client id never verifies as a refresh token and a leaked client secret
 * says nothing about the others.
 */
export interface OAuthKeys {
  /** Signs client ids (`sbc_…`). */
  readonly clientId: Buffer;
  /** Derives client secrets: HMAC-SHA256 of the client id. */
  readonly clientSecret: Buffer;
  /** Signs refresh tokens (`sbr_…`). */
  readonly refreshToken: Buffer;
}

/** Derives the OAuth keys from the server secret. */
export function deriveOAuthKeys(secret: string): OAuthKeys {
  return {
    clientId: deriveSandboxKey(secret, 'portcullis sandbox oauth client ids v1'),
    clientSecret: deriveSandboxKey(secret, 'portcullis sandbox oauth client secrets v1'),
    refreshToken: deriveSandboxKey(secret, 'portcullis sandbox oauth refresh tokens v1'),
  };
}
