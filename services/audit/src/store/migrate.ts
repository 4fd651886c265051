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
 * Creates the database and `schema_migrations`, then applies every migration not yet
 * recorded there, in order, recording each one after its statements succeeded. Statements
 * are written to be re-runnable (`IF NOT EXISTS`), so a crash between a migration and its
 * record, or two replicas starting at once, is harmless. Returns the versions applied now.
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
}
