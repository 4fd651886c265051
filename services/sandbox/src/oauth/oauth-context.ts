import type { Connector } from '@portcullis/core';
import type { OAuthAuthority } from './oauth-authority.ts';

/** What every OAuth endpoint of a connector works with, per request. */
export interface OAuthEndpointContext {
  authority: OAuthAuthority;
  connector: Connector;
  /** The base URL the request reached the sandbox at (`publicBaseUrlOf`). */
  base: string;
}
