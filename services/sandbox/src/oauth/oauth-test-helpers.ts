import { discoverAuthorizationServerMetadata, exchangeAuthorization, startAuthorization } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { AuthorizationServerMetadata, OAuthClientInformationMixed, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Sandbox } from '../sandbox.ts';
import type { ToolResultBody } from '../tools/tool-executor.ts';

/**
 * What the OAuth tests share: walking the consent page without a browser (GET the page,
 * POST its form), the SDK client calls of a full authorization, and an MCP client. Test
 * code only; nothing in `src/` imports it.
 */

/** A redirect URI nothing listens on: the tests read the `Location` of the 302 instead of following it. */
export const REDIRECT_URI = 'http://127.0.0.1:9/oauth/callback';

/** The consent form of an authorization page, as a browser would submit it. */
export interface ConsentForm {
  html: string;
  /** Absolute URL the form posts to. */
  action: string;
  /** The hidden inputs, by name. */
  fields: Record<string, string>;
}

/** What the member does on the consent page. */
export interface ConsentAnswer {
  login?: string;
  name?: string;
  decision?: 'approve' | 'deny';
}

const HTML_ENTITIES: Record<string, string> = { '&amp;': '&', '&lt;': '<', '&gt;': '>', '&quot;': '"', '&#39;': "'" };

function unescapeHtml(text: string): string {
  return text.replace(/&(?:amp|lt|gt|quot|#39);/g, (entity) => HTML_ENTITIES[entity] as string);
}

/** GETs an authorization URL and reads its consent form; fails unless the page is a 200. */
export async function openConsentPage(authorizationUrl: URL | string): Promise<ConsentForm> {
  const response = await fetch(authorizationUrl, { redirect: 'manual' });
  const html = await response.text();
  if (response.status !== 200) throw new Error(`consent page answered ${response.status}: ${html}`);
  const action = /<form method="post" action="([^"]+)">/.exec(html)?.[1];
  if (action === undefined) throw new Error('the consent page has no form');
  const fields: Record<string, string> = {};
  for (const match of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) fields[unescapeHtml(match[1] as string)] = unescapeHtml(match[2] as string);
  return { html, action: new URL(unescapeHtml(action), authorizationUrl).href, fields };
}

/** POSTs a consent form with the member's answer; the answer is a 302 (or a 400 page). */
export function submitConsent(form: ConsentForm, answer: ConsentAnswer): Promise<Response> {
  const body = new URLSearchParams({ ...form.fields, login: answer.login ?? '', name: answer.name ?? '', decision: answer.decision ?? 'approve' });
  return fetch(form.action, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body, redirect: 'manual' });
}

/** Opens the consent page, answers it, and returns where the sandbox redirects to. */
export async function consentTo(authorizationUrl: URL | string, answer: ConsentAnswer): Promise<URL> {
  const response = await submitConsent(await openConsentPage(authorizationUrl), answer);
  const location = response.headers.get('location');
  if (response.status !== 302 || location === null) throw new Error(`consent answered ${response.status}: ${await response.text()}`);
  return new URL(location);
}

/** `Authorization: Basic` of a client id and secret. */
export function basicAuthorization(clientId: string, clientSecret: string): string {
  return `Basic ${Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(clientSecret)}`).toString('base64')}`;
}

/** POSTs form parameters. */
export function postForm(url: string, params: Record<string, string>, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers }, body: new URLSearchParams(params) });
}

/** POSTs JSON. */
export function postJson(url: string, body: unknown): Promise<Response> {
  return fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) });
}

/** The issuer (authorization server URL) of a connector. */
export function issuerOf(sandbox: Sandbox, service: string): string {
  return `${sandbox.url}/${service}`;
}

/** The authorization server metadata of a connector, found as the SDK finds it. */
export async function metadataOf(sandbox: Sandbox, service: string): Promise<AuthorizationServerMetadata> {
  const metadata = await discoverAuthorizationServerMetadata(issuerOf(sandbox, service));
  if (!metadata) throw new Error(`no authorization server metadata for ${service}`);
  return metadata;
}

/** A started authorization: where to send the member, and the PKCE verifier to redeem the code with. */
export interface StartedAuthorization {
  authorizationUrl: URL;
  codeVerifier: string;
}

/** `startAuthorization` of the SDK for a connector, with a state and the connector's MCP endpoint as resource. */
export function startAt(sandbox: Sandbox, service: string, metadata: AuthorizationServerMetadata, clientInformation: OAuthClientInformationMixed, state = 'state-123'): Promise<StartedAuthorization> {
  return startAuthorization(issuerOf(sandbox, service), { metadata, clientInformation, redirectUrl: REDIRECT_URI, state, resource: new URL(sandbox.upstreamUrl(service)) });
}

/** The whole authorization of a member with the SDK's client functions: start, consent, exchange the code. */
export async function authorizeMember(sandbox: Sandbox, service: string, clientInformation: OAuthClientInformationMixed, answer: ConsentAnswer): Promise<OAuthTokens> {
  const metadata = await metadataOf(sandbox, service);
  const { authorizationUrl, codeVerifier } = await startAt(sandbox, service, metadata, clientInformation);
  const redirect = await consentTo(authorizationUrl, answer);
  const code = redirect.searchParams.get('code');
  if (code === null) throw new Error(`no code in ${redirect.href}`);
  return exchangeAuthorization(issuerOf(sandbox, service), {
    metadata,
    clientInformation,
    authorizationCode: code,
    codeVerifier,
    redirectUri: REDIRECT_URI,
    resource: new URL(sandbox.upstreamUrl(service)),
  });
}

/** An SDK MCP client connected to a connector with a Bearer token; the caller closes it. */
export async function connectMcp(sandbox: Sandbox, service: string, accessToken: string): Promise<Client> {
  const client = new Client({ name: 'sandbox-oauth-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(sandbox.upstreamUrl(service)), { requestInit: { headers: { Authorization: `Bearer ${accessToken}` } } }));
  return client;
}

/** The body of a successful tool result. */
export function toolBodyOf(result: CallToolResult): ToolResultBody {
  const [content] = result.content;
  if (result.isError || content?.type !== 'text') throw new Error(`expected a successful text result, got ${JSON.stringify(result)}`);
  return JSON.parse(content.text) as ToolResultBody;
}

/** Calls one tool and returns the identity the sandbox saw. */
export async function identitySeenBy(sandbox: Sandbox, service: string, tool: string, accessToken: string): Promise<ToolResultBody['identity']> {
  const client = await connectMcp(sandbox, service, accessToken);
  try {
    return toolBodyOf((await client.callTool({ name: tool, arguments: {} })) as CallToolResult).identity;
  } finally {
    await client.close();
  }
}

/** A raw MCP `initialize` POST with a Bearer token, to see the 401s the SDK client would turn into errors. */
export function initializeWith(sandbox: Sandbox, service: string, accessToken: string): Promise<Response> {
  return fetch(sandbox.upstreamUrl(service), {
    method: 'POST',
    headers: { authorization: `Bearer ${accessToken}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }),
  });
}
