import type { IncomingMessage } from 'node:http';

/** The URLs of one connector's protected resource and authorization server, under a base URL. */
export interface ConnectorOAuthUrls {
  /** The MCP endpoint, the protected resource: `<base>/<key>/mcp`. */
  resource: string;
  /** RFC 9728 metadata of the resource: `<base>/.well-known/oauth-protected-resource/<key>/mcp`. */
  resourceMetadata: string;
  /** The authorization server's issuer: `<base>/<key>`. */
  issuer: string;
  /** RFC 8414 metadata, path inserted after the well-known prefix: `<base>/.well-known/oauth-authorization-server/<key>`. */
  authorizationServerMetadata: string;
  authorizationEndpoint: string;
  tokenEndpoint: string;
  revocationEndpoint: string;
  userinfoEndpoint: string;
  registrationEndpoint: string;
}

/** Every OAuth URL of connector `key`. */
export function oauthUrlsOf(base: string, key: string): ConnectorOAuthUrls {
  const issuer = `${base}/${key}`;
  return {
    resource: `${issuer}/mcp`,
    resourceMetadata: `${base}/.well-known/oauth-protected-resource/${key}/mcp`,
    issuer,
    authorizationServerMetadata: `${base}/.well-known/oauth-authorization-server/${key}`,
    authorizationEndpoint: `${issuer}/oauth/authorize`,
    tokenEndpoint: `${issuer}/oauth/token`,
    revocationEndpoint: `${issuer}/oauth/revoke`,
    userinfoEndpoint: `${issuer}/oauth/userinfo`,
    registrationEndpoint: `${issuer}/oauth/register`,
  };
}

/** A host name, IPv4 address or bracketed IPv6 address, with an optional port. */
const HOST_HEADER = /^(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

/**
 * The base URL a request reached the sandbox at: `http://<Host header>`, so metadata and
 * redirects name the address the client used (the same as `sandbox.url` for clients that
 * use it); `fallback` (`sandbox.url`) when the header is missing or malformed.
 */
export function publicBaseUrlOf(req: IncomingMessage, fallback: string): string {
  const host = req.headers.host;
  return host !== undefined && HOST_HEADER.test(host) ? `http://${host}` : fallback;
}
