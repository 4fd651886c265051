import type { ServerResponse } from 'node:http';
import type { Connector } from '@portcullis/core';
import { sendJson } from '../http/http-io.ts';
import { CLIENT_AUTH_METHODS } from './oauth-clients.ts';
import { oauthUrlsOf } from './oauth-urls.ts';

/** The name the sandbox shows for a connector: `<Label> (sandbox)`. */
export function sandboxNameOf(connector: Connector): string {
  return `${connector.label} (sandbox)`;
}

/** RFC 9728 metadata of a connector's MCP endpoint: its one authorization server is `<base>/<key>`. */
export function protectedResourceMetadataOf(base: string, connector: Connector): Record<string, unknown> {
  const urls = oauthUrlsOf(base, connector.key);
  return {
    resource: urls.resource,
    authorization_servers: [urls.issuer],
    bearer_methods_supported: ['header'],
    resource_name: sandboxNameOf(connector),
  };
}

/**
 * RFC 8414 metadata of a connector's authorization server. Only `managed` connectors offer
 * dynamic client registration, as their real providers do; `own_app` ones need an app that
 * an owner registers (`POST /_sandbox/<key>/apps`).
 */
export function authorizationServerMetadataOf(base: string, connector: Connector): Record<string, unknown> {
  const urls = oauthUrlsOf(base, connector.key);
  return {
    issuer: urls.issuer,
    authorization_endpoint: urls.authorizationEndpoint,
    token_endpoint: urls.tokenEndpoint,
    revocation_endpoint: urls.revocationEndpoint,
    userinfo_endpoint: urls.userinfoEndpoint,
    ...(connector.oauth === 'managed' ? { registration_endpoint: urls.registrationEndpoint } : {}),
    response_types_supported: ['code'],
    grant_types_supported: ['authorization_code', 'refresh_token'],
    code_challenge_methods_supported: ['S256'],
    token_endpoint_auth_methods_supported: [...CLIENT_AUTH_METHODS],
  };
}

/** Answers a metadata document; readable from browsers too (MCP clients in web pages fetch it). */
export function sendMetadata(res: ServerResponse, metadata: Record<string, unknown>): void {
  sendJson(res, 200, metadata, { 'access-control-allow-origin': '*', 'cache-control': 'no-cache' });
}
