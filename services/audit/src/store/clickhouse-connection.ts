import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { createClient, type ClickHouseClient } from '@clickhouse/client';

/** Where the audit store lives: a ClickHouse server, or embedded chDB in a directory. */
export type ClickHouseTarget =
  | { kind: 'server'; url: string; username?: string | undefined; password?: string | undefined }
  | { kind: 'chdb'; path: string };

/**
 * One `@clickhouse/client` for either back end, plus a streaming read that really streams
 * on both (see `streamRows`).
 */
export interface ClickHouseConnection {
  readonly kind: ClickHouseTarget['kind'];
  readonly client: ClickHouseClient;
  /**
   * Runs a SELECT and yields its JSONEachRow rows in batches as the engine produces them,
   * never holding the whole result. Leaving the loop early cancels the query.
   */
  streamRows<T>(query: string, params: Record<string, unknown>): AsyncIterable<T[]>;
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
    async *streamRows<T>(query: string, params: Record<string, unknown>) {
      const resultSet = await client.query({ query, query_params: params, format: 'JSONEachRow' });
      try {
        for await (const rows of resultSet.stream<T>()) yield rows.map((row) => row.json<T>());
      } finally {
        resultSet.close();
      }
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
 * per directory within a process) and use `queryStreamBind`, which fetches chunk by chunk.
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
  const client = createClient({ connection: chdbConnection as any });
  const openStreams = new Set<InstanceType<typeof Session>>();
  return {
    kind: 'chdb',
    client,
    async *streamRows<T>(query: string, params: Record<string, unknown>) {
      const session = new Session(dataPath);
      openStreams.add(session);
      try {
        for await (const chunk of session.queryStreamBind(query, params, { format: 'JSONEachRow' })) {
          yield chunk.rows<T>();
        }
      } finally {
        openStreams.delete(session);
        session.close();
      }
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
