import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { ClickHouseClient } from '@clickhouse/client';

const MIGRATIONS_DIR = fileURLToPath(new URL('./migrations/', import.meta.url));
const FILE_NAME = /^(\d{3})_([a-z0-9_]+)\.sql$/;

/** One numbered migration file. */
export interface Migration {
  version: number;
  name: string;
  statements: string[];
}

/** Reads `NNN_name.sql` files in version order; each statement ends with `;` at a line end. */
export function readMigrations(dir: string = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((file) => FILE_NAME.test(file))
    .sort()
    .map((file) => {
      const [, version, name] = FILE_NAME.exec(file)!;
      return { version: Number(version), name: name!, statements: splitStatements(readFileSync(`${dir}/${file}`, 'utf8')) };
    });
}

/** Drops `--` comment lines and splits on `;` at a line end (the HTTP interface takes one statement per request). */
export function splitStatements(sql: string): string[] {
  return sql
    .split('\n')
    .filter((line) => !line.trimStart().startsWith('--'))
    .join('\n')
    .split(/;[ \t]*(?:\n|$)/)
    .map((statement) => statement.trim())
    .filter((statement) => statement.length > 0);
}

/**
 * Creates the database and `schema_migrations`, then, holding the migration lock, applies
 * every migration not yet recorded there, in order, recording each one after its statements
 * succeeded. The lock makes several processes starting at once (audit writers on one server)
 * take turns: the second finds the migrations recorded and does nothing, instead of re-running
 * a table swap under the first one's writer. Returns the versions applied now.
 */
export async function applyMigrations(client: ClickHouseClient, database: string, migrations: Migration[] = readMigrations()): Promise<number[]> {
  const params = { database };
  await client.command({ query: 'CREATE DATABASE IF NOT EXISTS {database:Identifier}', query_params: params });
  await client.command({
    query: `CREATE TABLE IF NOT EXISTS {database:Identifier}.schema_migrations
            (version UInt32, name String, applied_at DateTime64(3, 'UTC') DEFAULT now64(3))
            ENGINE = ReplacingMergeTree ORDER BY version`,
    query_params: params,
  });
  return withMigrationLock(client, database, async () => {
    const result = await client.query({
      query: 'SELECT version FROM {database:Identifier}.schema_migrations FINAL',
      query_params: params,
      format: 'JSONEachRow',
    });
    const applied = new Set((await result.json<{ version: number | string }>()).map((row) => Number(row.version)));

    const appliedNow: number[] = [];
    for (const migration of migrations) {
      if (applied.has(migration.version)) continue;
      for (const statement of migration.statements) {
        await client.command({ query: statement, query_params: params });
      }
      await client.command({
        query: 'INSERT INTO {database:Identifier}.schema_migrations (version, name) SELECT {version:UInt32}, {name:String}',
        query_params: { ...params, version: migration.version, name: migration.name },
      });
      appliedNow.push(migration.version);
    }
    return appliedNow;
  });
}

/** A lock left by a process that died while migrating is broken after this long. */
const STALE_LOCK_MS = 10 * 60_000;
const LOCK_WAIT_MS = 120_000;

/**
 * A cross-process mutex made of a table: `CREATE TABLE` without `IF NOT EXISTS` succeeds for
 * exactly one caller. Held while migrating, dropped after; one older than `STALE_LOCK_MS`
 * (its holder died) is dropped by the next process that waits for it.
 */
async function withMigrationLock<T>(client: ClickHouseClient, database: string, fn: () => Promise<T>): Promise<T> {
  const params = { database };
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    try {
      await client.command({ query: 'CREATE TABLE {database:Identifier}.schema_migrations_lock (at DateTime DEFAULT now()) ENGINE = Memory', query_params: params });
      break;
    } catch (err) {
      if (!/already exists/i.test(err instanceof Error ? err.message : String(err))) throw err;
      if (Date.now() > deadline) throw new Error(`another process has held the audit store's migration lock for over ${LOCK_WAIT_MS / 1000} s`, { cause: err });
      const lock = await client.query({
        query: `SELECT toUnixTimestamp(metadata_modification_time) AS at FROM system.tables WHERE database = {database:String} AND name = 'schema_migrations_lock'`,
        query_params: params, format: 'JSONEachRow',
      });
      const [row] = await lock.json<{ at: number | string }>();
      if (row && Date.now() - Number(row.at) * 1000 > STALE_LOCK_MS) {
        await client.command({ query: 'DROP TABLE IF EXISTS {database:Identifier}.schema_migrations_lock', query_params: params });
      } else {
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
  }
  try {
    return await fn();
  } finally {
    await client.command({ query: 'DROP TABLE IF EXISTS {database:Identifier}.schema_migrations_lock', query_params: params }).catch(() => undefined);
  }
}
