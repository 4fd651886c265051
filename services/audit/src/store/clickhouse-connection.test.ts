import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectClickHouse, type ClickHouseConnection } from './clickhouse-connection.ts';
import { StreamEndError } from './stream-tail.ts';

/**
 * The server back end's raw export read (`streamRaw` over `client.exec`), against a stand-in
 * for a ClickHouse server's HTTP interface that answers with fixed bodies: no ClickHouse
 * server runs on the development machine, so this checks the wiring (the request the client
 * sends, raw bytes through unchanged, CR LF kept, an error appended mid-stream turned into a
 * failure), not ClickHouse itself. The SQL is exercised on chDB by `export-lines.test.ts`.
 */
const CSV = 'a,"b\r\nc",d\r\n'.repeat(20_000); // ~300 KB: more than the guard holds back
const TAG = 'x7Kq2mZp9sLw4nB1';
const requests: Array<{ url: string; body: string }> = [];
let server: Server;
let connection: ClickHouseConnection;

async function bodyOf(req: IncomingMessage): Promise<string> {
  const parts: Buffer[] = [];
  for await (const part of req) parts.push(part as Buffer);
  return Buffer.concat(parts).toString('utf8');
}

beforeAll(async () => {
  server = createServer(async (req, res) => {
    if (req.url?.startsWith('/ping')) return res.end('Ok.\n');
    const body = await bodyOf(req);
    requests.push({ url: req.url ?? '', body });
    const mode = new URL(req.url ?? '/', 'http://x').searchParams.get('param_mode');
    res.writeHead(200, { 'Content-Type': 'text/tab-separated-values', ...(mode === 'tagged' ? { 'X-ClickHouse-Exception-Tag': TAG } : {}) });
    for (let i = 0; i < CSV.length; i += 64 * 1024) res.write(CSV.slice(i, i + 64 * 1024));
    if (mode === 'tagged') res.write(`__exception__\r\n${TAG}\r\nCode: 241. DB::Exception: Memory limit (total) exceeded. (MEMORY_LIMIT_EXCEEDED)\n75 ${TAG}\r\n__exception__\r\n`);
    if (mode === 'plain') res.write('Code: 159. DB::Exception: Timeout exceeded: elapsed 5.0 seconds. (TIMEOUT_EXCEEDED) (version 24.8.4.13 (official build))\n');
    res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  connection = await connectClickHouse({ kind: 'server', url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
});

afterAll(async () => {
  await connection?.close();
  await new Promise<void>((resolve) => server?.close(() => resolve()));
});

async function read(mode: string): Promise<string> {
  const parts: Buffer[] = [];
  for await (const chunk of connection.streamRaw('SELECT line FROM t WHERE x = {mode:String}', { mode }, 'TabSeparatedRaw')) parts.push(Buffer.from(chunk));
  return Buffer.concat(parts).toString('utf8');
}

describe('streamRaw on a ClickHouse server (HTTP)', () => {
  it('sends the query with its FORMAT and bound parameters, and yields the body byte for byte', async () => {
    expect(await read('clean')).toBe(CSV);
    const request = requests.at(-1)!;
    expect(request.body).toBe('SELECT line FROM t WHERE x = {mode:String}\nFORMAT TabSeparatedRaw');
    expect(new URL(request.url, 'http://x').searchParams.get('param_mode')).toBe('clean');
  });

  it.each([['tagged', /MEMORY_LIMIT_EXCEEDED/], ['plain', /TIMEOUT_EXCEEDED/]])('fails on an error appended mid-stream (%s) and never yields its text', async (mode, message) => {
    const yielded: string[] = [];
    const run = (async () => {
      for await (const chunk of connection.streamRaw('SELECT 1 WHERE {mode:String} != \'\'', { mode }, 'TabSeparatedRaw')) yielded.push(Buffer.from(chunk).toString('utf8'));
    })();
    await expect(run).rejects.toThrow(StreamEndError);
    await expect(run).rejects.toThrow(message);
    expect(yielded.join('')).not.toContain('Exception');
    expect(CSV.startsWith(yielded.join(''))).toBe(true);
  });
});
