import { z } from 'zod';
import {
  ClientCapabilitiesSchema, ErrorCode, ImplementationSchema, isJSONRPCNotification, isJSONRPCRequest, LoggingLevelSchema,
  type JSONRPCNotification, type JSONRPCRequest,
} from '@modelcontextprotocol/sdk/types.js';

/** The stateless protocol revisions `/mcp` serves (decision 032); every earlier one is the 2025 era. */
export const MODERN_PROTOCOL_VERSIONS = ['2026-07-28'] as const;
const FIRST_MODERN_PROTOCOL_VERSION = '2026-07-28';

/** The reserved keys of a 2026-07-28 request's `params._meta` envelope. */
export const PROTOCOL_VERSION_META_KEY = 'io.modelcontextprotocol/protocolVersion';
export const CLIENT_INFO_META_KEY = 'io.modelcontextprotocol/clientInfo';
export const CLIENT_CAPABILITIES_META_KEY = 'io.modelcontextprotocol/clientCapabilities';
const LOG_LEVEL_META_KEY = 'io.modelcontextprotocol/logLevel';
const REQUIRED_ENVELOPE_KEYS = [PROTOCOL_VERSION_META_KEY, CLIENT_CAPABILITIES_META_KEY];

/** The 2026-07-28 code for headers that disagree with the body, or are missing (SEP-2243 `HeaderMismatch`). */
export const JSONRPC_HEADER_MISMATCH = -32020;
/** The 2026-07-28 code for a protocol revision the server does not serve; `data` lists the ones it does. */
export const JSONRPC_UNSUPPORTED_PROTOCOL_VERSION = -32022;

/** The envelope, checked with the SDK's own schemas for its parts; other keys pass. */
const EnvelopeSchema = z.looseObject({
  [PROTOCOL_VERSION_META_KEY]: z.string(),
  [CLIENT_INFO_META_KEY]: ImplementationSchema.optional(),
  [CLIENT_CAPABILITIES_META_KEY]: ClientCapabilitiesSchema,
  [LOG_LEVEL_META_KEY]: LoggingLevelSchema.optional(),
});

/** The standard request headers of the 2026-07-28 Streamable HTTP transport, as received. */
export interface EraHeaders {
  protocolVersion: string | undefined;
  method: string | undefined;
  name: string | undefined;
}

/** A refusal before anything is served: HTTP 400 and this JSON-RPC error. */
export interface EraRejection {
  kind: 'reject';
  code: number;
  message: string;
  data?: unknown;
}

export type EraRoute =
  | { kind: 'legacy' }
  | { kind: 'modern'; message: JSONRPCRequest | JSONRPCNotification; revision: string }
  | EraRejection;

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

export const isModernProtocolVersion = (version: string) => version >= FIRST_MODERN_PROTOCOL_VERSION;

/** The `params._meta` of a message, when it is an object. */
export function envelopeOf(params: unknown): Record<string, unknown> | undefined {
  const meta = isPlainObject(params) ? params._meta : undefined;
  return isPlainObject(meta) ? meta : undefined;
}

/** A message claims the 2026-07-28 era exactly when its `_meta` names a protocol version. */
const claimsModernEra = (params: unknown) => PROTOCOL_VERSION_META_KEY in (envelopeOf(params) ?? {});

/** The first problem of an envelope, as `key: problem`; undefined when it is valid. */
function envelopeProblem(meta: Record<string, unknown>): { key: string; problem: string } | undefined {
  const missing = REQUIRED_ENVELOPE_KEYS.find((key) => !(key in meta));
  if (missing) return { key: missing, problem: 'missing' };
  const parsed = EnvelopeSchema.safeParse(meta);
  if (parsed.success) return undefined;
  const issue = parsed.error.issues[0]!;
  return { key: issue.path.length > 0 ? issue.path.map(String).join('.') : '_meta', problem: issue.message };
}

/** What a refusal echoes of the client's input is bounded. */
const clip = (text: string, max: number) => (text.length > max ? `${text.slice(0, max)}…` : text);

const mismatch = (header: string, body: string): EraRejection => {
  const echoed = { header: clip(header, 200), body: clip(body, 1_000) };
  return { kind: 'reject', code: JSONRPC_HEADER_MISMATCH, message: `Bad Request: the request headers and body disagree: ${echoed.body}`, data: { mismatch: echoed } };
};

const invalidEnvelope = (problem: { key: string; problem: string }): EraRejection => ({
  kind: 'reject', code: ErrorCode.InvalidParams,
  message: `Invalid _meta envelope for protocol revision 2026-07-28: ${problem.key}: ${problem.problem}`, data: { envelope: problem },
});

/**
 * Which era a POST body belongs to, as the MCP SDK v2 classifies it (body first, headers as a
 * cross-check): a request or notification whose `_meta` names a protocol version is the
 * 2026-07-28 era — a malformed envelope, or a `MCP-Protocol-Version` / `Mcp-Method` header
 * that disagrees with the body, is refused, never served as 2025 traffic. So is a request
 * whose header names 2026-07-28 without an envelope, and a batch holding a modern message.
 * Everything else (initialize, session traffic, batches, posted responses, malformed bodies)
 * is the 2025 era, served as before.
 */
export function classifyEra(body: unknown, headers: EraHeaders): EraRoute {
  const headerVersion = headers.protocolVersion?.trim();
  const headerMethod = headers.method?.trim();
  const headerNamesModern = headerVersion !== undefined && isModernProtocolVersion(headerVersion);

  if (Array.isArray(body)) {
    return body.some((m) => claimsModernEra(isPlainObject(m) ? m.params : undefined))
      ? { kind: 'reject', code: ErrorCode.InvalidRequest, message: 'Bad Request: JSON-RPC batches may not contain requests for protocol revision 2026-07-28 or later' }
      : { kind: 'legacy' };
  }
  // 2025 traffic claims nothing, in body or header: it goes on without another look.
  if (!headerNamesModern && !claimsModernEra(isPlainObject(body) ? body.params : undefined)) return { kind: 'legacy' };
  const isRequest = isJSONRPCRequest(body);
  if (!isRequest && !isJSONRPCNotification(body)) {
    return isPlainObject(body) && claimsModernEra(body.params) && typeof body.method === 'string'
      ? { kind: 'reject', code: ErrorCode.InvalidRequest, message: 'Bad Request: the request body is not a valid JSON-RPC message' }
      : { kind: 'legacy' };
  }
  const message = body as JSONRPCRequest | JSONRPCNotification;
  const meta = envelopeOf(message.params);

  if (claimsModernEra(message.params)) {
    const problem = envelopeProblem(meta!);
    if (isRequest && problem) return invalidEnvelope(problem);
    const claimed = meta![PROTOCOL_VERSION_META_KEY];
    if (typeof claimed !== 'string') return invalidEnvelope(problem ?? { key: PROTOCOL_VERSION_META_KEY, problem: 'expected a protocol version string' });
    if (headerVersion !== undefined && headerVersion !== claimed) {
      return mismatch(headerVersion, `the body envelope names protocol version ${claimed} but the MCP-Protocol-Version header names ${headerVersion}`);
    }
    if (headerMethod !== undefined && headerMethod !== message.method) {
      return mismatch(headerMethod, `the body names method ${message.method} but the Mcp-Method header names ${headerMethod}`);
    }
    return { kind: 'modern', message, revision: claimed };
  }
  if (isRequest && message.method === 'initialize') {
    return headerNamesModern
      ? mismatch(headerVersion, 'an initialize request (legacy handshake) was sent with a modern MCP-Protocol-Version header')
      : { kind: 'legacy' };
  }
  if (!headerNamesModern) return { kind: 'legacy' };
  if (!isRequest) {
    // A notification under a 2026-07-28 header: accepted (202) like any other, whatever its envelope.
    if (headerMethod !== undefined && headerMethod !== message.method) {
      return mismatch(headerMethod, `the notification body names method ${message.method} but the Mcp-Method header names ${headerMethod}`);
    }
    return { kind: 'modern', message, revision: headerVersion };
  }
  const missing = meta ? REQUIRED_ENVELOPE_KEYS.filter((key) => !(key in meta)) : ['_meta'];
  return {
    kind: 'reject', code: ErrorCode.InvalidParams,
    message: `Invalid params: the MCP-Protocol-Version header names protocol revision ${clip(headerVersion, 64)}, but the request is missing the required per-request envelope key(s): ${missing.join(', ')}`,
    data: { envelope: { missing } },
  };
}

/** The body field `Mcp-Name` mirrors, by method (SEP-2243); only `tools/call` is served here. */
const NAME_SOURCE: Record<string, string> = { 'tools/call': 'name', 'prompts/get': 'name', 'resources/read': 'uri' };

const BASE64_SENTINEL = /^=\?base64\?(.*)\?=$/;
const CANONICAL_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** A header value as sent, or the text of its `=?base64?…?=` form; undefined when that form is broken. */
function decodeHeaderValue(value: string): string | undefined {
  const sentinel = BASE64_SENTINEL.exec(value);
  if (!sentinel) return value;
  if (!CANONICAL_BASE64.test(sentinel[1]!)) return undefined;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(Buffer.from(sentinel[1]!, 'base64'));
  } catch {
    return undefined;
  }
}

/**
 * The standard headers a 2026-07-28 *request* must carry (notifications are exempt):
 * `MCP-Protocol-Version`, `Mcp-Method`, and for `tools/call` an `Mcp-Name` equal to
 * `params.name`. A missing or disagreeing header is refused (-32020, HTTP 400).
 */
export function standardHeaderProblem(request: JSONRPCRequest, revision: string, headers: EraHeaders): EraRejection | undefined {
  if (headers.protocolVersion === undefined) {
    return mismatch('(missing)', `the body envelope names protocol version ${revision} but the required MCP-Protocol-Version header is absent`);
  }
  if (headers.method === undefined) return mismatch('(missing)', `the body names method ${request.method} but the required Mcp-Method header is absent`);
  const field = Object.hasOwn(NAME_SOURCE, request.method) ? NAME_SOURCE[request.method]! : undefined;
  if (!field) return undefined;
  const bodyValue = isPlainObject(request.params) && typeof request.params[field] === 'string' ? request.params[field] : undefined;
  if (headers.name === undefined) {
    return bodyValue === undefined ? undefined : mismatch('(missing)', `the body carries params.${field}="${bodyValue}" but the required Mcp-Name header is absent`);
  }
  const name = headers.name.trim();
  const decoded = decodeHeaderValue(name);
  if (decoded === undefined) return mismatch(name, 'the Mcp-Name header carries an invalid Base64 sentinel value');
  if (bodyValue !== undefined && decoded !== bodyValue) {
    return mismatch(name, `the body carries params.${field}="${bodyValue}" but the Mcp-Name header names "${decoded}"`);
  }
  return undefined;
}
