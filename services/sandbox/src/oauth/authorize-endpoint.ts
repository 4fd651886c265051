import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CallerIdentity } from '../tools/tool-executor.ts';
import { parseAuthorizationRequest, redirectWith, type AuthorizationRequest } from './authorization-request.ts';
import { renderConsentPage, renderRefusalPage } from './consent-page.ts';
import { MAX_CLIENT_NAME_LENGTH } from './oauth-clients.ts';
import type { OAuthEndpointContext } from './oauth-context.ts';
import { oauthParamsOf, queryOf, readForm, sendHtml, sendRedirect, type OAuthParams } from './oauth-io.ts';
import { sandboxNameOf } from './oauth-metadata.ts';
import { oauthUrlsOf } from './oauth-urls.ts';

const MAX_LOGIN_LENGTH = 200;

/** What the member typed on the consent page, and the identity it makes or why it makes none. */
interface ConsentInput {
  typed: { login?: string; name?: string };
  identity?: CallerIdentity;
  problem?: string;
}

/** The member typed on the consent page: a login (trimmed, 1–200 characters) and an optional name. */
function consentInputOf(params: OAuthParams): ConsentInput {
  const login = params.get('login')?.trim() ?? '';
  const name = params.get('name')?.trim() ?? '';
  const typed = { ...(login !== '' ? { login } : {}), ...(name !== '' ? { name } : {}) };
  if (login === '') return { typed, problem: 'Enter a login.' };
  if (login.length > MAX_LOGIN_LENGTH) return { typed, problem: `The login must not exceed ${MAX_LOGIN_LENGTH} characters.` };
  if (name.length > MAX_CLIENT_NAME_LENGTH) return { typed, problem: `The name must not exceed ${MAX_CLIENT_NAME_LENGTH} characters.` };
  return { typed, identity: name !== '' ? { login, name } : { login } };
}

/** The member's answer on the consent page: approve → code, deny → `access_denied`, else the page again. */
function answerDecision(res: ServerResponse, context: OAuthEndpointContext, request: AuthorizationRequest, params: OAuthParams): void {
  const { authority, connector } = context;
  const decision = params.get('decision');
  if (decision === 'deny') {
    sendRedirect(res, redirectWith(request.redirectUri, { error: 'access_denied', error_description: 'The member declined the request', state: request.state }));
    return;
  }
  const input = consentInputOf(params);
  const problem = decision !== 'approve' ? 'Choose Authorize or Cancel.' : input.problem;
  if (problem !== undefined || input.identity === undefined) {
    const page = { serviceName: sandboxNameOf(connector), request, formAction: `/${connector.key}/oauth/authorize` };
    sendHtml(res, 400, renderConsentPage({ ...page, problem: problem ?? 'Enter a login.', ...input.typed }));
    return;
  }
  const code = authority.issueCode(
    { client: request.client, redirectUri: request.redirectUri, codeChallenge: request.codeChallenge, ...(request.resource !== undefined ? { resource: request.resource } : {}) },
    input.identity,
  );
  sendRedirect(res, redirectWith(request.redirectUri, { code, state: request.state }));
}

/**
 * `/<connector>/oauth/authorize`. `GET` with the authorization request in the query renders
 * the consent page; its form `POST`s the same parameters plus `login`, `name` and `decision`
 * back here (form-encoded), which redirects to the client with a code or `access_denied`.
 * A request whose client or redirect URI does not check out gets a 400 page and no redirect;
 * other protocol errors are redirected to the client with `error` and `state`.
 */
export async function handleAuthorize(req: IncomingMessage, res: ServerResponse, context: OAuthEndpointContext): Promise<void> {
  const serviceName = sandboxNameOf(context.connector);
  let params: OAuthParams;
  if (req.method === 'GET') {
    params = oauthParamsOf(queryOf(req));
  } else if (req.method === 'POST') {
    const form = await readForm(req);
    if (!form.ok) {
      sendHtml(res, form.status, renderRefusalPage(serviceName, form.description), form.headers);
      return;
    }
    params = form.params;
  } else {
    sendHtml(res, 405, renderRefusalPage(serviceName, 'Use GET or POST.'), { allow: 'GET, POST' });
    return;
  }

  const parsed = parseAuthorizationRequest(params, { authority: context.authority, connectorKey: context.connector.key, resource: oauthUrlsOf(context.base, context.connector.key).resource });
  if (parsed.kind === 'refuse') {
    sendHtml(res, 400, renderRefusalPage(serviceName, parsed.message));
    return;
  }
  if (parsed.kind === 'redirect_error') {
    sendRedirect(res, redirectWith(parsed.redirectUri, { error: parsed.error, error_description: parsed.description, state: parsed.state }));
    return;
  }
  if (req.method === 'GET') {
    sendHtml(res, 200, renderConsentPage({ serviceName, request: parsed.request, formAction: `/${context.connector.key}/oauth/authorize` }));
    return;
  }
  answerDecision(res, context, parsed.request, params);
}
