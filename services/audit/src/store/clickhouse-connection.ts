import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { Readable } from 'node:stream';
import { createClient, type ClickHouseClient } from '@clickhouse/client';
import { TrailingErrorGuard } from './stream-tail.ts';
import { createFairTurns } from './engine-turns.ts';

/** Where the audit store lives: a ClickHouse server, or embedded chDB in a directory. */
export type ClickHouseTarget =
  | { kind: 'server'; url: string; username?: string | undefined; password?: string | undefined }
  | { kind: 'chdb'; path: string };

/** Output formats `streamRaw` is used with: text written by the engine, passed on as is. */
export type RawFormat = 'TabSeparatedRaw';

/** The header in which servers from 25.11 on name the tag that frames a mid-stream error. */
const EXCEPTION_TAG_HEADER = 'x-clickhouse-exception-tag';

/**
 * One `@clickhouse/client` for either back end, plus a streaming read that really streams
 * on both (see `streamRaw`).
 */
export interface ClickHouseConnection {
  readonly kind: ClickHouseTarget['kind'];
  readonly client: ClickHouseClient;
  /**
   * Runs a SELECT (without a FORMAT clause) and yields its output in `format` as raw bytes,
   * chunk by chunk as the engine produces them, never holding the whole result. The next
   * chunk is not fetched until the consumer asks for it; leaving the loop early cancels the
   * query. An engine error, also one after the first chunk, throws; its text is never yielded.
   */
  streamRaw(query: string, params: Record<string, unknown>, format: RawFormat): AsyncIterable<Uint8Array>;
  /**
   * Inserts `body`, JSON objects one per line (JSONEachRow), into `table` with the given input
   * settings. The bytes go to the engine's own parser as they are: a server gets them as the
   * request body, embedded chDB through its raw insert (no INSERT statement built of them).
   */
  insertJsonLines(table: string, body: Uint8Array, settings: Record<string, number | string>): Promise<void>;
  close(): Promise<void>;
}

/** Raised when the store cannot be reached or opened; a retry may help. */
export class AuditStoreUnavailableError extends Error {
  override readonly name = 'AuditStoreUnavailableError';
}

/** Opens the client for `target` and checks that the engine answers. */
export async function connectClickHouse(target: ClickHouseTarget): Promise<ClickHouseConnection> {
  const connection = target.kind === 'server' ? connectServer(target) : await connectChdb(target.path);
  const ping = await connection.client.ping();
  if (!ping.success) {
    await connection.close().catch(() => undefined);
    const where = target.kind === 'server' ? target.url : target.path;
    throw new AuditStoreUnavailableError(`audit store at ${where} does not answer: ${ping.error.message}`, { cause: ping.error });
  }
  return connection;
}

function connectServer(target: Extract<ClickHouseTarget, { kind: 'server' }>): ClickHouseConnection {
  const client = createClient({
    url: target.url,
    ...(target.username ? { username: target.username } : {}),
    ...(target.password ? { password: target.password } : {}),
  });
  return {
    kind: 'server',
    client,
    // `exec`, not `query(…).stream()`: the result set's stream splits rows at LF and, on
    // servers from 25.11 on, takes any CR LF for the start of an error block — and every CSV
    // record ends in CR LF. `exec` hands over the raw body; `TrailingErrorGuard` does the
    // error check on it instead.
    async *streamRaw(query: string, params: Record<string, unknown>, format: RawFormat) {
      const abort = new AbortController();
      const result = await client.exec({ query: `${query}\nFORMAT ${format}`, query_params: params, abort_signal: abort.signal });
      const body = result.stream as Readable;
      const tag = result.response_headers[EXCEPTION_TAG_HEADER];
      const guard = new TrailingErrorGuard(typeof tag === 'string' ? tag : undefined);
      try {
        for await (const chunk of body) yield* guard.push(chunk as Buffer);
        const tail = guard.end();
        if (tail.length > 0) yield tail;
      } finally {
        body.destroy();
        abort.abort();
      }
    },
    async insertJsonLines(table, body, settings) {
      // `insert` would encode each stream chunk as a row: the bytes go as the body of the statement instead.
      const result = await client.exec({ query: `INSERT INTO ${table} FORMAT JSONEachRow`, values: Readable.from([body], { objectMode: false }), clickhouse_settings: settings });
      for await (const _ of result.stream as Readable) { /* the answer is empty; read to its end */ }
    },
    close: () => client.close(),
  };
}

/**
 * chDB through its `@clickhouse/client` connection adapter. Verified on chdb 3.4.0: query,
 * command, insert (JSONEachRow), `{name:Type}` parameters (String, arrays, UUID,
 * DateTime64, Identifier) and ping all work. One gap: the adapter's `query` materialises
 * the whole result before handing it over, so `ResultSet.stream()` is not a stream there.
 * Exports therefore open a native `Session` on the same directory (chDB shares one engine
 * per directory within a process) and use `queryStreamBind`, which fetches chunk by chunk
 * and hands over each chunk's raw bytes.
 * A Session allows one active stream, so each export gets a Session of its own.
 */
async function connectChdb(path: string): Promise<ClickHouseConnection> {
  const dataPath = resolve(path);
  mkdirSync(dirname(dataPath), { recursive: true });
  const { createChdbConnection } = await import('chdb/connection');
  const { Session, drainPending } = await import('chdb');
  // The adapter is typed against @clickhouse/client-common, of which client 1.23.1 bundles
  // its own copy, so the types do not line up although the runtime contract does.
  let chdbConnection: ReturnType<typeof createChdbConnection>;
  try {
    chdbConnection = createChdbConnection({ path: dataPath });
  } catch (err) {
    throw new AuditStoreUnavailableError(
      `embedded audit store at ${dataPath} could not be opened (chDB allows one process per directory, and one directory per process): ${(err as Error).message}`,
      { cause: err },
    );
  }
  // One engine turn at a time for reads, shared fairly between tenants (decision 069). chDB
  // runs parameterised queries one after another anyway (one process-wide chain, first come
  // first served, so one tenant's burst of queries delayed everyone's), and a stream's start
  // is a synchronous call that waits on the engine while another query runs (it held this
  // process's event loop 30-50 ms behind a busy engine). Reads and stream starts take turns
  // here: a stream starts only when the engine is free, so its start returns at once; each of
  // its chunks is fetched off the event loop in a turn of its own. Inserts are asynchronous and
  // go their own way.
  const turns = createFairTurns();
  for (const method of ['query', 'exec', 'command'] as const) {
    const original = chdbConnection[method].bind(chdbConnection) as (...args: unknown[]) => Promise<unknown>;
    (chdbConnection as unknown as Record<string, unknown>)[method] = (...args: unknown[]) => turns.run(() => original(...args));
  }
  const client = createClient({ connection: chdbConnection as any });
  const openStreams = new Set<InstanceType<typeof Session>>();
  return {
    kind: 'chdb',
    client,
    async *streamRaw(query: string, params: Record<string, unknown>, format: RawFormat) {
      const session = new Session(dataPath);
      openStreams.add(session);
      try {
        // One chunk per engine block; the next is fetched only when the consumer asks.
        const stream = await turns.run(async () => session.queryStreamBind(query, params, { format }));
        // Each chunk is fetched in a turn of its own too: an export's engine work then counts
        // for its tenant, and does not run beside another tenant's query.
        const chunks = stream[Symbol.asyncIterator]();
        try {
          for (;;) {
            const next = await turns.run(() => chunks.next());
            if (next.done) break;
            yield next.value.raw();
          }
        } finally {
          await chunks.return?.();
        }
      } finally {
        openStreams.delete(session);
        session.close();
      }
    },
    async insertJsonLines(table, body, settings) {
      if (body.length === 0) return;
      await chdbConnection.chdb.rawInsert({ table, format: 'JSONEachRow', values: body, settings });
    },
    async close() {
      for (const session of openStreams) session.close();
      openStreams.clear();
      await client.close();
      // close() can return while native work still holds the directory; wait so the same
      // directory can be opened again in this process.
      await drainPending();
    },
  };
}

