import { isolatingFetch } from '@portcullis/core';

/** The stateless MCP revision a raw client speaks. */
export const MODERN_PROTOCOL_VERSION = '2026-07-28';

export interface RawReply {
  status: number;
  /** The parsed JSON body (undefined when there is none). */
  body: any;
}

/** Headers over the standard ones; `null` leaves one out. */
export type HeaderOverrides = Record<string, string | null>;

/**
 * A 2026-07-28 MCP client written against the specification with `fetch` alone, no SDK: every
 * request carries its `_meta` envelope (protocol version, client capabilities, client info)
 * and the `MCP-Protocol-Version`, `Mcp-Method` and (for `tools/call`) `Mcp-Name` headers.
 * Requests go to `urls` in turn, so one client can alternate between gateway replicas.
 */
export function rawModernMcp(urls: string[], memberKey: string, clientInfo: { name: string; version: string }, options: { sessionHandle?: string } = {}) {
  let turn = 0;
  let nextId = 1;
  const envelope = () => ({
    'io.modelcontextprotocol/protocolVersion': MODERN_PROTOCOL_VERSION,
    'io.modelcontextprotocol/clientCapabilities': {},
    'io.modelcontextprotocol/clientInfo': clientInfo,
    ...(options.sessionHandle !== undefined ? { 'portcullis/sessionHandle': options.sessionHandle } : {}),
  });

  /** Posts `body` as it is, with the standard headers for `method` (and `name`) under `headers`. */
  async function post(body: unknown, method: string, name: string | undefined, headers: HeaderOverrides = {}): Promise<RawReply> {
    const all: Record<string, string | null> = {
      authorization: `Bearer ${memberKey}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream',
      'mcp-protocol-version': MODERN_PROTOCOL_VERSION, 'mcp-method': method, ...(name !== undefined ? { 'mcp-name': name } : {}), ...headers,
    };
    const sent = Object.fromEntries(Object.entries(all).filter((e): e is [string, string] => e[1] !== null));
    const res = await isolatingFetch(`${urls[turn++ % urls.length]}/mcp`, { method: 'POST', headers: sent, body: JSON.stringify(body) });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  }

  return {
    envelope,
    post,
    /** One request: `params` plus the envelope (and `meta`, over it) in `_meta`. */
    request(method: string, params: Record<string, unknown> = {}, o: { headers?: HeaderOverrides; meta?: Record<string, unknown> } = {}): Promise<RawReply> {
      const body = { jsonrpc: '2.0', id: nextId++, method, params: { ...params, _meta: { ...envelope(), ...o.meta } } };
      return post(body, method, method === 'tools/call' ? String(params.name) : undefined, o.headers);
    },
    /** `tools/call`, expecting a result (a refused call fails the test with its reply). */
    async callTool(name: string, args: Record<string, unknown> = {}): Promise<{ isError?: boolean; content: Array<{ type: string; text: string }>; resultType: string }> {
      const reply = await this.request('tools/call', { name, arguments: args });
      if (reply.status !== 200 || !reply.body?.result) throw new Error(`tools/call ${name} answered ${reply.status}: ${JSON.stringify(reply.body)}`);
      return reply.body.result;
    },
  };
}
