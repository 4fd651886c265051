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

/**
 * One MCP client session on a connector's upstream, spoken directly over HTTP (Streamable HTTP,
 * 2025 era): `initialize` once, then each `tools/call` is one POST on a kept-alive socket. The
 * SDK's `Client` is not used on this path: it validated, wrapped and streamed each call through
 * `fetch` and web streams, which cost more than the upstream call itself. Results are still
 * validated with the SDK's `CallToolResultSchema`.
 */
export class UpstreamSession {
  private sessionId: string | undefined;
  private protocolVersion = LATEST_PROTOCOL_VERSION;
  private nextId = 1;
  readonly ready: Promise<void>;

  constructor(private readonly url: string, private readonly accessToken: string, timeoutMs: number) {
    this.ready = this.initialize(Date.now() + timeoutMs);
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
    const answer = await this.post({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: tool, arguments: args } }, deadline, true);
    if (!answer) throw new McpError(ErrorCode.InternalError, 'The connector sent no answer to the call.');
    if (answer.error) throw new McpError(answer.error.code, answer.error.message, answer.error.data);
    const parsed = CallToolResultSchema.safeParse(answer.result);
    if (!parsed.success) throw new McpError(ErrorCode.InvalidParams, `Invalid tools/call result: ${parsed.error.message.slice(0, 300)}`);
    return parsed.data;
  }

  private async post(message: Record<string, unknown>, deadline: number, expectAnswer: boolean): Promise<JsonRpcAnswer | undefined> {
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      authorization: `Bearer ${this.accessToken}`,
    };
    if (this.sessionId) {
      headers['mcp-session-id'] = this.sessionId;
      headers['mcp-protocol-version'] = this.protocolVersion;
    }
    const response = await postOnce(this.url, headers, JSON.stringify(message), Math.max(1, deadline - Date.now()));
    if (response.status === 202) return undefined;
    if (response.status < 200 || response.status >= 300) throw new UpstreamHttpError(response.status);
    const sessionHeader = response.headers['mcp-session-id'];
    if (typeof sessionHeader === 'string' && message.method === 'initialize') this.sessionId = sessionHeader;
    if (!expectAnswer) return undefined;
    const messages = messagesOf(String(response.headers['content-type'] ?? ''), response.text);
    return messages.find((m) => m.id === message.id && ('result' in m || 'error' in m));
  }
}
