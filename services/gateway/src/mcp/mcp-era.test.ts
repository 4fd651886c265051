import { describe, expect, it } from 'vitest';
import { classifyEra, standardHeaderProblem, type EraHeaders } from './mcp-era.ts';

const ENVELOPE = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
const call = (meta: Record<string, unknown> | null = ENVELOPE, name = 'github__get_me') =>
  ({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: {}, ...(meta ? { _meta: meta } : {}) } });
const headers = (o: Partial<EraHeaders> = {}): EraHeaders => ({ protocolVersion: '2026-07-28', method: 'tools/call', name: 'github__get_me', ...o });
const none: EraHeaders = { protocolVersion: undefined, method: undefined, name: undefined };

describe('era classification (decision 032), as the MCP SDK v2 classifies', () => {
  it('leaves 2025 traffic to the 2025 era: initialize, session requests, notifications, batches, responses, malformed bodies', () => {
    const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'c', version: '1' } } };
    for (const body of [
      initialize, call(null), { jsonrpc: '2.0', method: 'notifications/initialized' }, [call(null), call(null)],
      { jsonrpc: '2.0', id: 1, result: {} }, { hello: 'world' }, call({ progressToken: 1 }),
    ]) {
      expect(classifyEra(body, none)).toEqual({ kind: 'legacy' });
      expect(classifyEra(body, { ...none, protocolVersion: '2025-11-25' })).toEqual({ kind: 'legacy' });
    }
  });

  it('routes a request whose _meta names a protocol version to the 2026-07-28 era, whatever that version', () => {
    expect(classifyEra(call(), headers())).toMatchObject({ kind: 'modern', revision: '2026-07-28' });
    expect(classifyEra(call(), none)).toMatchObject({ kind: 'modern' }); // headers are checked later, for requests
    const future = { ...ENVELOPE, 'io.modelcontextprotocol/protocolVersion': '2099-01-01' };
    expect(classifyEra(call(future), headers({ protocolVersion: '2099-01-01' }))).toMatchObject({ kind: 'modern', revision: '2099-01-01' });
  });

  it('refuses headers that disagree with the body (-32020), a malformed envelope (-32602) and modern batches (-32600)', () => {
    expect(classifyEra(call(), headers({ protocolVersion: '2025-11-25' }))).toMatchObject({ kind: 'reject', code: -32020 });
    expect(classifyEra(call(), headers({ method: 'tools/list' }))).toMatchObject({ kind: 'reject', code: -32020 });
    expect(classifyEra(call({ 'io.modelcontextprotocol/protocolVersion': '2026-07-28' }), headers())).toMatchObject({
      kind: 'reject', code: -32602, data: { envelope: { key: 'io.modelcontextprotocol/clientCapabilities', problem: 'missing' } },
    });
    expect(classifyEra(call({ ...ENVELOPE, 'io.modelcontextprotocol/clientInfo': { name: 7 } }), headers())).toMatchObject({ kind: 'reject', code: -32602 });
    expect(classifyEra(call(null), headers())).toMatchObject({ kind: 'reject', code: -32602, data: { envelope: { missing: ['_meta'] } } });
    expect(classifyEra([call()], headers())).toMatchObject({ kind: 'reject', code: -32600 });
    const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'c', version: '1' } } };
    expect(classifyEra(initialize, headers({ method: undefined }))).toMatchObject({ kind: 'reject', code: -32020 });
  });

  it('bounds what a refusal echoes of the headers', () => {
    const refusal = classifyEra(call(), headers({ method: 'x'.repeat(10_000) }));
    expect(refusal.kind === 'reject' && refusal.message.length).toBeLessThan(1_200);
  });
});

describe('standard request headers of the 2026-07-28 transport', () => {
  const request = call() as Parameters<typeof standardHeaderProblem>[0];
  it('wants MCP-Protocol-Version, Mcp-Method and, for tools/call, an Mcp-Name equal to params.name (Base64 form too)', () => {
    expect(standardHeaderProblem(request, '2026-07-28', headers())).toBeUndefined();
    expect(standardHeaderProblem(request, '2026-07-28', headers({ name: `=?base64?${Buffer.from('github__get_me').toString('base64')}?=` }))).toBeUndefined();
    for (const bad of [{ protocolVersion: undefined }, { method: undefined }, { name: undefined }, { name: 'github__list_issues' }, { name: '=?base64?not base64?=' }]) {
      expect(standardHeaderProblem(request, '2026-07-28', headers(bad)), JSON.stringify(bad)).toMatchObject({ kind: 'reject', code: -32020 });
    }
    const list = { jsonrpc: '2.0', id: 2, method: 'tools/list', params: { _meta: ENVELOPE } } as Parameters<typeof standardHeaderProblem>[0];
    expect(standardHeaderProblem(list, '2026-07-28', headers({ method: 'tools/list', name: undefined }))).toBeUndefined();
  });
});
