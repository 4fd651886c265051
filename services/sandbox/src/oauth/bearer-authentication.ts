import type { IncomingMessage, ServerResponse } from 'node:http';
import { sendJson } from '../http/http-io.ts';
import { bearerTokenOf, type SandboxTokenClaims } from '../sandbox-tokens.ts';
import type { OAuthAuthority } from './oauth-authority.ts';

/** Why a request to a protected endpoint (MCP, userinfo) is refused. */
export type BearerProblem = 'missing' | 'invalid' | 'expired' | 'revoked';

/** The verified token of a request, or why there is none. */
export type BearerAuthentication = { ok: true; token: string; claims: SandboxTokenClaims } | { ok: false; problem: BearerProblem };

/** Authenticates `Authorization: Bearer <access token>` at connector `connectorKey`. */
export function authenticateBearer(req: IncomingMessage, authority: OAuthAuthority, connectorKey: string): BearerAuthentication {
  const token = bearerTokenOf(req.headers.authorization);
  if (token === undefined) return { ok: false, problem: 'missing' };
  const check = authority.checkAccessToken(connectorKey, token);
  return check.ok ? { ok: true, token, claims: check.claims } : check;
}

const DESCRIPTIONS: Record<Exclude<BearerProblem, 'missing'>, string> = {
  invalid: 'The token is invalid or not for this connector',
  expired: 'The access token expired',
  revoked: 'The access token was revoked',
};

/**
 * Answers 401 (RFC 6750 §3): no error code when no credentials came, `invalid_token` with a
 * description when they did not pass. `resourceMetadata` (RFC 9728 §5.1) tells an MCP client
 * where to start OAuth discovery.
 */
export function sendBearerChallenge(res: ServerResponse, problem: BearerProblem, resourceMetadata?: string): void {
  const metadataParam = resourceMetadata !== undefined ? `resource_metadata="${resourceMetadata}"` : undefined;
  if (problem === 'missing') {
    const challenge = metadataParam !== undefined ? `Bearer ${metadataParam}` : 'Bearer';
    sendJson(res, 401, { error: 'invalid_request', error_description: 'Authorization: Bearer <token> is required' }, { 'www-authenticate': challenge });
    return;
  }
  const description = DESCRIPTIONS[problem];
  const challenge = ['error="invalid_token"', `error_description="${description}"`, ...(metadataParam !== undefined ? [metadataParam] : [])].join(', ');
  sendJson(res, 401, { error: 'invalid_token', error_description: description }, { 'www-authenticate': `Bearer ${challenge}` });
}
