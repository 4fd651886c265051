import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PGlite } from '@electric-sql/pglite';
import { drizzle as drizzlePglite } from 'drizzle-orm/pglite';
import { migrate as migratePglite } from 'drizzle-orm/pglite/migrator';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import { migrate as migratePg } from 'drizzle-orm/node-postgres/migrator';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import pg from 'pg';
import * as schema from './schema/index.ts';

export type Schema = typeof schema;
/** One drizzle type for both drivers: code written against it runs on PGlite and Postgres. */
export type Database = PgDatabase<PgQueryResultHKT, Schema>;

export interface DatabaseHandle {
  db: Database;
  kind: 'postgres' | 'pglite';
  /** Cheap liveness probe for `/api/status`. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

const migrationsFolder = fileURLToPath(new URL('./migrations', import.meta.url));
/** Advisory lock id that serialises migrations when several processes start at once. */
const MIGRATION_LOCK_ID = 7_340_121;

/**
 * Opens Postgres at `DATABASE_URL`, or embedded PGlite under `DATA_DIR/pg` when it is
 * unset, and applies the migrations in the repo. The same migrations serve both.
 */
export async function openDatabase(config: { DATABASE_URL?: string | undefined; DATA_DIR: string }, options: { migrate?: boolean } = {}): Promise<DatabaseHandle> {
  const shouldMigrate = options.migrate ?? true;
  if (config.DATABASE_URL) {
    const pool = new pg.Pool({ connectionString: config.DATABASE_URL, max: 10 });
    pool.on('error', () => { /* an idle client lost its connection; the pool replaces it */ });
    const db = drizzlePg(pool, { schema }) as unknown as Database;
    if (shouldMigrate) {
      const client = await pool.connect();
      try {
        await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_ID]);
        await migratePg(drizzlePg(client, { schema }), { migrationsFolder });
      } finally {
        await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_ID]).catch(() => undefined);
        client.release();
      }
    }
    return {
      db,
      kind: 'postgres',
      ping: async () => { await pool.query('SELECT 1'); },
      close: () => pool.end(),
    };
  }
  const dir = join(config.DATA_DIR, 'pg');
  mkdirSync(dir, { recursive: true });
  const client = new PGlite(dir);
  await client.waitReady;
  const db = drizzlePglite(client, { schema });
  if (shouldMigrate) await migratePglite(db, { migrationsFolder });
  return {
    db: db as unknown as Database,
    kind: 'pglite',
    ping: async () => { await client.query('SELECT 1'); },
    close: () => client.close(),
  };
}
