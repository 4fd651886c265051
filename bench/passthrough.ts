/**
 * bench/passthrough: the bare-transport baseline for bench/mcp-overhead.
 *
 * A plain Node HTTP server that forwards every request, as bytes, to one upstream MCP endpoint on
 * kept-alive undici sockets and pipes the answer back. It enforces nothing, keeps no state and
 * parses nothing: what it adds to a call is the floor of any Node proxy on this machine (one more
 * HTTP hop, in a process of its own). Run as its own process:
 *   PASSTHROUGH_PORT=… PASSTHROUGH_UPSTREAM=http://127.0.0.1:…/github/mcp tsx bench/passthrough.ts
 */
import { createServer } from 'node:http';
import { Agent, request } from 'undici';

const port = Number(process.env.PASSTHROUGH_PORT);
const upstream = new URL(process.env.PASSTHROUGH_UPSTREAM ?? '');
const dispatcher = new Agent({ keepAliveTimeout: 60_000, connections: 256 });
const dropped = new Set(['host', 'connection', 'keep-alive', 'transfer-encoding', 'content-length']);

createServer(async (req, res) => {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (!dropped.has(name) && typeof value === 'string') headers[name] = value;
  }
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  try {
    const answer = await request(upstream, {
      method: req.method as 'GET' | 'POST' | 'DELETE', headers, dispatcher,
      body: chunks.length > 0 ? Buffer.concat(chunks) : undefined,
    });
    const out: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(answer.headers)) {
      if (!dropped.has(name) && value !== undefined) out[name] = value;
    }
    res.writeHead(answer.statusCode, out);
    for await (const chunk of answer.body) res.write(chunk);
    res.end();
  } catch {
    if (!res.headersSent) res.writeHead(502);
    res.end();
  }
}).listen(port, '127.0.0.1', () => console.log(`passthrough listening on ${port}`));
