/**
 * TEST-ONLY STAND-IN for a ClickHouse server. No ClickHouse server recent enough installs on
 * this machine, and embedded chDB allows one process per data directory, so tests that need
 * several audit writers on one store (or the `CLICKHOUSE_URL` code path at all) point them at
 * this: a small HTTP front serving ClickHouse's HTTP interface over chDB — enough for
 * `@clickhouse/client`: `GET /ping`, queries and commands in the body, inserts with the
 * statement in `?query=` and rows in the body, `param_*` bindings, settings as URL
 * parameters, `default_format`, and errors as ClickHouse sends them (status 500, a
 * `Code: N. DB::Exception: …` body, `X-ClickHouse-Exception-Code`). Results are buffered, not
 * streamed. Never part of the product: the product talks to it by `CLICKHOUSE_URL` exactly as
 * to a real server.
 *
 *   CLICKHOUSE_FRONT_DIR=<dataDir> CLICKHOUSE_FRONT_PORT=<port> node --import tsx test/support/clickhouse-front.ts
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Session } from 'chdb';

/** URL parameters that are not settings. */
const NOT_SETTINGS = new Set(['query', 'query_id', 'database', 'session_id', 'default_format', 'role', 'user', 'password']);
/** Settings the HTTP interface has and the embedded engine refuses to SET. */
const HTTP_ONLY = new Set([
  'wait_end_of_query', 'send_progress_in_http_headers', 'http_response_buffer_size', 'http_headers_progress_interval_ms',
  'http_send_progress_interval_ms', 'enable_http_compression', 'http_zlib_compression_level', 'http_response_compression_method',
  'http_native_compression_disable_checksumming_on_decompress', 'output_format_json_quote_64bit_integers',
]);

async function bodyOf(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function fail(res: ServerResponse, err: unknown, sql: string) {
  const message = (err instanceof Error ? err.message : String(err)) || 'unknown error (empty message from the engine)';
  // Printed so a test that fails under load can show what the engine refused.
  console.error(`clickhouse front: ${message.slice(0, 300)} in: ${sql.slice(0, 160).replace(/\s+/g, ' ')}`);
  const code = /^Code: (\d+)\./.exec(message)?.[1] ?? '1000';
  res.writeHead(500, { 'content-type': 'text/plain; charset=UTF-8', 'x-clickhouse-exception-code': code });
  res.end(/^Code: \d+\./.test(message) ? message : `Code: ${code}. DB::Exception: ${message}`);
}

export function startClickHouseFront(dataDir: string, port: number): Promise<{ url: string; close(): Promise<void> }> {
  const session = new Session(dataDir);
  // One statement at a time, as one engine session runs them.
  let queue: Promise<unknown> = Promise.resolve();

  // ClickHouse takes URIs up to 1 MiB (http_max_uri_size); Node's default of 16 kB would refuse,
  // with an empty 431, a probe whose bound ids travel in the URL.
  const server = createServer({ maxHeaderSize: 1 << 20 }, (req, res) => {
    const url = new URL(req.url ?? '/', 'http://front');
    if (url.pathname === '/ping' || (req.method === 'GET' && url.pathname === '/' && !url.searchParams.has('query'))) {
      res.writeHead(200, { 'content-type': 'text/plain; charset=UTF-8' }).end('Ok.\n');
      return;
    }
    let sql = '';
    void (async () => {
      const body = req.method === 'POST' ? await bodyOf(req) : '';
      const inUrl = url.searchParams.get('query');
      sql = inUrl ? (body ? `${inUrl}\n${body}` : inUrl) : body;
      if (!sql.trim()) throw new Error('Code: 62. DB::Exception: Empty query. (SYNTAX_ERROR)');
      const params: Record<string, string> = {};
      const settings: string[] = [];
      for (const [key, value] of url.searchParams) {
        if (key.startsWith('param_')) params[key.slice('param_'.length)] = value;
        else if (!NOT_SETTINGS.has(key) && !HTTP_ONLY.has(key) && /^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) {
          settings.push(`SET ${key} = ${/^-?\d+(\.\d+)?$/.test(value) ? value : `'${value.replace(/'/g, "''")}'`}`);
        }
      }
      if (settings.length > 0) sql = `${settings.join('; ')}; ${sql}`;
      const format = url.searchParams.get('default_format') ?? 'TabSeparated';
      const run = queue.then(() => (Object.keys(params).length > 0 ? session.queryBindAsync(sql, params, { format }) : session.queryAsync(sql, { format })));
      queue = run.catch(() => undefined);
      const result = await run;
      const bytes = Buffer.from(result.bytes());
      res.writeHead(200, {
        'content-type': 'text/plain; charset=UTF-8',
        'x-clickhouse-summary': JSON.stringify({ read_rows: String(result.rowsRead ?? 0), read_bytes: String(result.bytesRead ?? 0), written_rows: '0', written_bytes: '0', total_rows_to_read: '0', result_rows: '0', result_bytes: String(bytes.length), elapsed_ns: '0' }),
        'x-clickhouse-format': format,
      });
      res.end(bytes);
    })().catch((err: unknown) => fail(res, err, sql));
  });

  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve({
      url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
      close: () => new Promise<void>((done) => server.close(() => { session.close(); done(); })),
    }));
  });
}

if (process.env.CLICKHOUSE_FRONT_DIR && process.argv[1]?.endsWith('clickhouse-front.ts')) {
  const front = await startClickHouseFront(process.env.CLICKHOUSE_FRONT_DIR, Number(process.env.CLICKHOUSE_FRONT_PORT ?? 0));
  console.log(`clickhouse front listening on ${front.url}`);
  const stop = () => void front.close().then(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

/** Starts the front as a process of its own (so it, not the test, owns the chDB directory). */
export async function startClickHouseFrontProcess(dataDir: string): Promise<{ url: string; process: import('./processes.ts').RunningProcess }> {
  const { startTs } = await import('./processes.ts');
  const proc = startTs('test/support/clickhouse-front.ts', { CLICKHOUSE_FRONT_DIR: dataDir, CLICKHOUSE_FRONT_PORT: '0' }, 'clickhouse-front');
  const [, url] = await proc.waitFor(/clickhouse front listening on (\S+)/);
  return { url: url!, process: proc };
}
