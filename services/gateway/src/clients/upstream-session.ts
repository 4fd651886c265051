import { Agent, type Dispatcher } from 'undici';
import {
  CallToolResultSchema, ErrorCode, LATEST_PROTOCOL_VERSION, McpError, SUPPORTED_PROTOCOL_VERSIONS, type CallToolResult,
} from '@modelcontextprotocol/sdk/types.js';

/**
 * Kept-alive connections to every upstream, shared by all sessions of the process: a call
 * costs a request on an open socket, never a TCP or TLS set-up.
 */
const upstreamAgent = new Agent({ keepAliveTimeout: 60_000, keepAliveMaxTimeout: 300_000, connections: 256 });

/** The upstream answered with an HTTP status that is not a JSON-RPC answer (401, 404, 5xx…). */
export class UpstreamHttpError extends Error {
  override readonly name = 'UpstreamHttpError';
  constructor(readonly status: number) {
    super(`The connector answered HTTP ${status}.`);
  }
}

/** The call did not complete within its deadline. */
export class UpstreamTimeout extends Error {
  override readonly name = 'UpstreamTimeout';
}

const CLIENT_INFO = { name: 'portcullis-gateway', version: '0.1.0' };

interface JsonRpcAnswer { id?: unknown; result?: unknown; error?: { code: number; message: string; data?: unknown } }

/** An upstream answer larger than this is refused: one connector's answer must not fill the gateway's memory. */
export const MAX_UPSTREAM_ANSWER_BYTES = 32 * 1024 * 1024;

/** The answer is larger than MAX_UPSTREAM_ANSWER_BYTES. */
export class UpstreamAnswerTooLarge extends Error {
  override readonly name = 'UpstreamAnswerTooLarge';
}

interface UpstreamAnswer { status: number; headers: Record<string, string | string[] | undefined>; text: string }

const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

/**
 * One POST on a kept-alive socket, the answer collected whole. Spoken through undici's
 * `dispatch` handler rather than `request()`: no body stream per call, which cost more than
 * the rest of the call's client side (decision 034).
 */
function postOnce(url: string, headers: Record<string, string>, body: string, timeoutMs: number): Promise<UpstreamAnswer> {
  const { origin, pathname, search } = new URL(url);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let answer: Omit<UpstreamAnswer, 'text'> | undefined;
    const handler: Dispatcher.DispatchHandler = {
      // Its presence tells undici this handler speaks the new (controller) API.
      onRequestStart() {},
      onResponseStart(_controller, status, responseHeaders) {
        answer = { status, headers: responseHeaders as UpstreamAnswer['headers'] };
      },
      onResponseData(controller, chunk) {
        size += chunk.length;
        if (size > MAX_UPSTREAM_ANSWER_BYTES) return controller.abort(new UpstreamAnswerTooLarge(`The connector's answer exceeds ${MAX_UPSTREAM_ANSWER_BYTES} bytes.`));
        chunks.push(chunk);
      },
      onResponseEnd() {
        resolve({ ...answer!, text: chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8') });
      },
      onResponseError(_controller, err) {
        const code = (err as { code?: string }).code;
        reject(code && TIMEOUT_CODES.has(code) ? new UpstreamTimeout('The connector did not answer in time.', { cause: err }) : err);
      },
    };
    upstreamAgent.dispatch({ origin, path: pathname + search, method: 'POST', headers, body, headersTimeout: timeoutMs, bodyTimeout: timeoutMs }, handler);
  });
}

/** The JSON-RPC messages of a Streamable HTTP answer: a JSON body, or the `data:` of each SSE event. */
function messagesOf(contentType: string, text: string): JsonRpcAnswer[] {
  if (text.length === 0) return [];
  if (contentType.startsWith('text/event-stream')) {
    const messages: JsonRpcAnswer[] = [];
    for (const event of text.split(/\r?\n\r?\n/)) {
      const data = event.split(/\r?\n/).filter((line) => line.startsWith('data:')).map((line) => line.slice(5).replace(/^ /, '')).join('\n');
      if (data) messages.push(JSON.parse(data) as JsonRpcAnswer);
    }
    return messages;
  }
  const body = JSON.parse(text) as JsonRpcAnswer | JsonRpcAnswer[];
  return Array.isArray(body) ? body : [body];
}

/** The stateless revision spoken to upstreams that offer it (decision 060); others get the 2025 era. */
export const MODERN_UPSTREAM_VERSION = '2026-07-28';
const ENVELOPE = {
  'io.modelcontextprotocol/protocolVersion': MODERN_UPSTREAM_VERSION,
  'io.modelcontextprotocol/clientCapabilities': {},
  'io.modelcontextprotocol/clientInfo': CLIENT_INFO,
};
/** Keys a 2026-07-28 result carries that belong to the exchange with the upstream, not to the tool's result. */
const UPSTREAM_ONLY_RESULT_KEYS = ['resultType', 'ttlMs', 'cacheScope'];
const UPSTREAM_SERVER_INFO_META_KEY = 'io.modelcontextprotocol/serverInfo';

/** How long an upstream found speaking only the 2025 era is not asked again (it may be upgraded meanwhile). */
const LEGACY_ERA_REMEMBERED_MS = 10 * 60_000;
/**
 * The era each upstream URL spoke when last asked, so `server/discover` is paid once per
 * upstream rather than once per (member, connector) session: a 2026-07-28 upstream until it
 * refuses that revision, a 2025-era one for LEGACY_ERA_REMEMBERED_MS. Keyed by the
 * configured connector URLs: a handful of entries.
 */
const upstreamEras = new Map<string, { era: 'modern' | 'legacy'; since: number }>();

/** A 2026-07-28 upstream stopped serving that revision: the call is retried on a new session, which asks again. */
export class UpstreamEraChanged extends Error {
  override readonly name = 'UpstreamEraChanged';
}

/** The 2026-07-28 error code for a revision the server does not serve. */
const JSONRPC_UNSUPPORTED_PROTOCOL_VERSION = -32022;

/**
 * One MCP client session on a connector's upstream, spoken directly over HTTP. An upstream
 * that answers `server/discover` with 2026-07-28 among its versions is spoken to statelessly:
 * no `initialize`, each `tools/call` one POST with the protocol's `_meta` envelope and
 * `Mcp-Method`/`Mcp-Name` headers. Others get the 2025 era: `initialize` once, then each
 * `tools/call` one POST on the session. Either way on a kept-alive socket. The SDK's `Client`
 * is not used on this path: it validated, wrapped and streamed each call through `fetch` and
 * web streams, which cost more than the upstream call itself. Results are still validated
 * with the SDK's `CallToolResultSchema`, and read the same whatever era the upstream spoke.
 */
export class UpstreamSession {
  private sessionId: string | undefined;
  private protocolVersion = LATEST_PROTOCOL_VERSION;
  private modern = false;
  private nextId = 1;
  readonly ready: Promise<void>;

  constructor(private readonly url: string, private readonly accessToken: string, timeoutMs: number) {
    this.ready = this.open(Date.now() + timeoutMs);
  }

  /** The era this session speaks: 2026-07-28 where the upstream offers it. */
  get era(): 'modern' | 'legacy' {
    return this.modern ? 'modern' : 'legacy';
  }

  private async open(deadline: number): Promise<void> {
    const known = upstreamEras.get(this.url);
    const asked = known && (known.era === 'modern' || Date.now() - known.since < LEGACY_ERA_REMEMBERED_MS) ? known.era : undefined;
    const era = asked ?? (await this.discover(deadline) ? 'modern' : 'legacy');
    if (!asked) upstreamEras.set(this.url, { era, since: Date.now() });
    if (era === 'legacy') return this.initialize(deadline);
    this.modern = true;
    this.protocolVersion = MODERN_UPSTREAM_VERSION;
  }

  /**
   * Whether the upstream serves 2026-07-28. A 2025-era server refuses the request (HTTP 400
   * for want of a session, or a JSON-RPC error): that is an answer, not a failure. A 401 is
   * the member's credentials and fails the set-up, as `initialize` would.
   */
  private async discover(deadline: number): Promise<boolean> {
    const message = { jsonrpc: '2.0', id: 0, method: 'server/discover', params: { _meta: ENVELOPE } };
    const response = await postOnce(this.url, this.modernHeaders('server/discover'), JSON.stringify(message), Math.max(1, deadline - Date.now()));
    if (response.status === 401) throw new UpstreamHttpError(401);
    if (response.status < 200 || response.status >= 300) return false;
    let answer: JsonRpcAnswer | undefined;
    try {
      answer = messagesOf(String(response.headers['content-type'] ?? ''), response.text).find((m) => m.id === 0);
    } catch {
      return false;
    }
    const versions = (answer?.result as { supportedVersions?: unknown } | undefined)?.supportedVersions;
    return Array.isArray(versions) && versions.includes(MODERN_UPSTREAM_VERSION);
  }

  private async initialize(deadline: number): Promise<void> {
    const answer = await this.post({
      jsonrpc: '2.0', id: 0, method: 'initialize',
      params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: CLIENT_INFO },
    }, deadline, true);
    const result = answer?.result as { protocolVersion?: unknown } | undefined;
    if (answer?.error) throw new McpError(answer.error.code, answer.error.message, answer.error.data);
    if (typeof result?.protocolVersion !== 'string' || !SUPPORTED_PROTOCOL_VERSIONS.includes(result.protocolVersion)) {
      throw new McpError(ErrorCode.InvalidRequest, `The connector speaks an unsupported protocol version: ${String(result?.protocolVersion).slice(0, 40)}`);
    }
    this.protocolVersion = result.protocolVersion;
    await this.post({ jsonrpc: '2.0', method: 'notifications/initialized' }, deadline, false);
  }

  /** Calls `tool`; rejects with McpError (the upstream's JSON-RPC error), UpstreamHttpError, UpstreamTimeout or a network error. */
  async callTool(tool: string, args: Record<string, unknown>, deadline: number): Promise<CallToolResult> {
    const id = this.nextId++;
    const params = this.modern ? { name: tool, arguments: args, _meta: ENVELOPE } : { name: tool, arguments: args };
    const answer = await this.post({ jsonrpc: '2.0', id, method: 'tools/call', params }, deadline, true, tool);
    if (!answer) throw new McpError(ErrorCode.InternalError, 'The connector sent no answer to the call.');
    if (answer.error) {
      if (this.modern && answer.error.code === JSONRPC_UNSUPPORTED_PROTOCOL_VERSION) {
        upstreamEras.set(this.url, { era: 'legacy', since: Date.now() });
        throw new UpstreamEraChanged('The connector no longer serves protocol revision 2026-07-28.');
      }
      throw new McpError(answer.error.code, answer.error.message, answer.error.data);
    }
    const parsed = CallToolResultSchema.safeParse(this.modern ? toolResultOf(answer.result) : answer.result);
    if (!parsed.success) throw new McpError(ErrorCode.InvalidParams, `Invalid tools/call result: ${parsed.error.message.slice(0, 300)}`);
    return parsed.data;
  }

  private modernHeaders(method: string, name?: string): Record<string, string> {
    return {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      authorization: `Bearer ${this.accessToken}`,
      'mcp-protocol-version': MODERN_UPSTREAM_VERSION,
      'mcp-method': method,
      ...(name === undefined ? {} : { 'mcp-name': name }),
    };
  }

  private async post(message: Record<string, unknown>, deadline: number, expectAnswer: boolean, name?: string): Promise<JsonRpcAnswer | undefined> {
    let headers: Record<string, string>;
    if (this.modern) headers = this.modernHeaders(message.method as string, name);
    else {
      headers = {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${this.accessToken}`,
      };
      if (this.sessionId) {
        headers['mcp-session-id'] = this.sessionId;
        headers['mcp-protocol-version'] = this.protocolVersion;
      }
    }
    const response = await postOnce(this.url, headers, JSON.stringify(message), Math.max(1, deadline - Date.now()));
    if (response.status === 202) return undefined;
    if (response.status < 200 || response.status >= 300) {
      // A 2026-07-28 server refuses a revision it dropped with HTTP 400 and the JSON-RPC code: read it.
      if (!(this.modern && response.status === 400)) throw new UpstreamHttpError(response.status);
      const refusal = answerOf(response, message.id);
      if (refusal?.error?.code !== JSONRPC_UNSUPPORTED_PROTOCOL_VERSION) throw new UpstreamHttpError(response.status);
      return refusal;
    }
    const sessionHeader = response.headers['mcp-session-id'];
    if (typeof sessionHeader === 'string' && message.method === 'initialize') this.sessionId = sessionHeader;
    if (!expectAnswer) return undefined;
    return answerOf(response, message.id);
  }
}

/** The answer to request `id` among the messages of a response; undefined when there is none or the body is unreadable as one. */
function answerOf(response: UpstreamAnswer, id: unknown): JsonRpcAnswer | undefined {
  const messages = messagesOf(String(response.headers['content-type'] ?? ''), response.text);
  return messages.find((m) => m.id === id && ('result' in m || 'error' in m));
}

/**
 * A 2026-07-28 `tools/call` result as the tool's result: the exchange's own fields dropped, so
 * callers of either era read what a 2025-era upstream would have answered. A result that is not
 * complete (the upstream asks the client for input) is not relayed.
 */
function toolResultOf(result: unknown): unknown {
  if (result === null || typeof result !== 'object') return result;
  const { resultType } = result as { resultType?: unknown };
  if (resultType !== undefined && resultType !== 'complete') {
    throw new McpError(ErrorCode.InternalError, `The connector asked for more input (${String(resultType).slice(0, 40)}), which Portcullis does not relay.`);
  }
  const copy: Record<string, unknown> = { ...(result as Record<string, unknown>) };
  for (const key of UPSTREAM_ONLY_RESULT_KEYS) delete copy[key];
  const meta = copy._meta;
  if (meta !== null && typeof meta === 'object' && UPSTREAM_SERVER_INFO_META_KEY in meta) {
    const { [UPSTREAM_SERVER_INFO_META_KEY]: _, ...rest } = meta as Record<string, unknown>;
    if (Object.keys(rest).length > 0) copy._meta = rest;
    else delete copy._meta;
  }
  return copy;
}
