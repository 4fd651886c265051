import type { Handle } from '@sveltejs/kit';
import { env } from '$env/dynamic/private';

/** Request headers that describe one hop, not the request: never forwarded. */
const HOP_BY_HOP = ['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'content-length', 'host'];

/**
 * Split mode: the dashboard runs on its own (`node web/build/index.js`) and forwards `/api`,
 * `/mcp` and the OAuth endpoints for agent clients to the gateway at `PORTCULLIS_GATEWAY_URL`, streaming both ways (the live audit
 * stream and exports included). The gateway's `PUBLIC_URL` is then this server's address, so
 * its same-origin guard accepts the browser's `Origin` and its e-mailed links land here.
 * In single-process mode the gateway serves this app itself and the variable is unset.
 */
/**
 * What the gateway answers: `/api`, `/mcp`, and its OAuth authorization server for agent
 * clients (decision 050: metadata and the four endpoints); `/oauth/consent` is this app's page.
 */
const OAUTH_ENDPOINTS = new Set(['/oauth/authorize', '/oauth/token', '/oauth/register', '/oauth/revoke']);
function forwarded(path: string): boolean {
  return path === '/mcp' || path === '/api' || path.startsWith('/api/') || OAUTH_ENDPOINTS.has(path)
    || path === '/.well-known/oauth-authorization-server' || path === '/.well-known/oauth-protected-resource' || path.startsWith('/.well-known/oauth-protected-resource/');
}

/** This app's pages are never shown in another site's frame: the OAuth consent (and every button) cannot be clickjacked. */
const NO_FRAMING = { 'x-frame-options': 'DENY', 'content-security-policy': "frame-ancestors 'none'" };

export const handle: Handle = async ({ event, resolve }) => {
  const gateway = env.PORTCULLIS_GATEWAY_URL;
  const path = event.url.pathname;
  if (!gateway || !forwarded(path)) {
    event.setHeaders(NO_FRAMING);
    return resolve(event);
  }

  const headers = new Headers(event.request.headers);
  for (const name of HOP_BY_HOP) headers.delete(name);
  headers.set('x-forwarded-for', event.getClientAddress());
  const hasBody = event.request.method !== 'GET' && event.request.method !== 'HEAD';
  let upstream: Response;
  try {
    upstream = await fetch(new URL(path + event.url.search, gateway), {
      method: event.request.method,
      headers,
      body: hasBody ? event.request.body : undefined,
      redirect: 'manual',
      signal: event.request.signal,
      ...(hasBody ? { duplex: 'half' } : {}),
    } as RequestInit);
  } catch {
    return Response.json({ error: { code: 'unavailable', message: 'The gateway cannot be reached; try again shortly.' } }, { status: 503 });
  }
  const answer = new Headers(upstream.headers);
  answer.delete('content-encoding');
  answer.delete('content-length');
  return new Response(upstream.body, { status: upstream.status, statusText: upstream.statusText, headers: answer });
};
