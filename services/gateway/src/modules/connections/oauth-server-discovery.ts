import { discoverOAuthServerInfo } from '@modelcontextprotocol/sdk/client/auth.js';
import type { AuthorizationServerMetadata } from '@modelcontextprotocol/sdk/shared/auth.js';
import { isolatingFetch } from '@portcullis/core';

/** Where a connector's OAuth lives, as MCP's authorization discovery finds it. */
export interface OAuthServer {
  /** The upstream MCP server URL, sent as the RFC 8707 resource indicator. */
  resource: string;
  issuer: string;
  metadata: AuthorizationServerMetadata;
}

/** Raised when the upstream's authorization server cannot be found or reached. */
export class DiscoveryError extends Error {
  override readonly name = 'DiscoveryError';
}

const DISCOVERY_TTL_MS = 10 * 60_000;

/**
 * Finds each connector's authorization server the way MCP prescribes: protected-resource
 * metadata of the upstream MCP URL (RFC 9728), then the authorization server's metadata
 * (RFC 8414 / OpenID discovery), through the SDK. Results are cached for ten minutes per URL.
 */
export function createOAuthServerDiscovery(options: { fetchFn?: typeof fetch; now?: () => number } = {}) {
  const fetchFn = options.fetchFn ?? isolatingFetch;
  const now = options.now ?? Date.now;
  const cache = new Map<string, { at: number; server: Promise<OAuthServer> }>();

  async function discover(upstreamUrl: string): Promise<OAuthServer> {
    let info;
    try {
      info = await discoverOAuthServerInfo(upstreamUrl, { fetchFn });
    } catch (err) {
      throw new DiscoveryError(`authorization discovery failed for ${upstreamUrl}`, { cause: err });
    }
    const metadata = info.authorizationServerMetadata;
    if (!metadata) throw new DiscoveryError(`no authorization server metadata found for ${upstreamUrl}`);
    if (!metadata.code_challenge_methods_supported?.includes('S256')) {
      // OAuth 2.1 and MCP require PKCE with S256; a server that does not say so is not used.
      throw new DiscoveryError(`the authorization server of ${upstreamUrl} does not advertise PKCE S256`);
    }
    return { resource: info.resourceMetadata?.resource ?? upstreamUrl, issuer: metadata.issuer, metadata };
  }

  return {
    /** The authorization server of the MCP server at `upstreamUrl`. */
    find(upstreamUrl: string): Promise<OAuthServer> {
      const hit = cache.get(upstreamUrl);
      if (hit && now() - hit.at < DISCOVERY_TTL_MS) return hit.server;
      const server = discover(upstreamUrl);
      cache.set(upstreamUrl, { at: now(), server });
      // A failure is not remembered: the next connect tries again.
      server.catch(() => { if (cache.get(upstreamUrl)?.server === server) cache.delete(upstreamUrl); });
      return server;
    },
  };
}

export type OAuthServerDiscovery = ReturnType<typeof createOAuthServerDiscovery>;
