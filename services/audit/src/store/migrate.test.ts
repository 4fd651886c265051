import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeEntry, makeTempDir } from '../testing/audit-entries.ts';
import { openAuditStore } from './audit-store.ts';
import { connectClickHouse } from './clickhouse-connection.ts';
import { toRow } from './entry-row.ts';
import { applyMigrations, readMigrations, splitStatements } from './migrate.ts';

const dir = makeTempDir('migrate');
afterAll(() => dir.remove());

describe('migration files', () => {
  it('are numbered from 001 without gaps', () => {
    const versions = readMigrations().map((m) => m.version);
    expect(versions).toEqual(versions.map((_, i) => i + 1));
    expect(readMigrations()[0]).toMatchObject({ version: 1, name: 'audit_entries' });
  });

  it('split into statements on a trailing semicolon, without comment lines', () => {
    expect(splitStatements('-- a comment; with a semicolon\nCREATE TABLE a (x UInt8);\n\n-- next\nSELECT 1;\nSELECT 2')).toEqual([
      'CREATE TABLE a (x UInt8)', 'SELECT 1', 'SELECT 2',
    ]);
  });
});

describe('applyMigrations on chDB', () => {
  const target = { kind: 'chdb', path: join(dir.path, 'audit') } as const;

  it('applies each migration once, however often it runs', async () => {
    const connection = await connectClickHouse(target);
    try {
      expect(await applyMigrations(connection.client, 'audit_test')).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      expect(await applyMigrations(connection.client, 'audit_test')).toEqual([]);
      const recorded = await connection.client.query({
        query: 'SELECT version, name FROM {db:Identifier}.schema_migrations ORDER BY version',
        query_params: { db: 'audit_test' },
        format: 'JSONEachRow',
      });
      expect(await recorded.json()).toEqual([
        { version: 1, name: 'audit_entries' }, { version: 2, name: 'write_ahead_stage' }, { version: 3, name: 'one_row_per_entry' },
        { version: 4, name: 'agent_id_low_cardinality' }, { version: 5, name: 'rollups_written_by_the_writer' }, { version: 6, name: 'oauth_client_id' }, { version: 7, name: 'shadow_decision' }, { version: 8, name: 'call_approvals' }, { version: 9, name: 'ingest_from_bus_json' }, { version: 10, name: 'call_count_projection' },
      ]);
      // The name rollups have no views feeding them (the writer writes them); the only views
      // are the two that write the ingested JSON into the tables (migration 009).
      const views = await connection.client.query({
        query: "SELECT name FROM system.tables WHERE database = {db:String} AND engine = 'MaterializedView' ORDER BY name", query_params: { db: 'audit_test' }, format: 'JSONEachRow',
      });
      expect(await views.json()).toEqual([{ name: 'audit_ingest_entries_mv' }, { name: 'audit_ingest_open_mv' }]);
      const types = await connection.client.query({
        query: "SELECT table, type FROM system.columns WHERE database = {db:String} AND name = 'agent_id' AND table IN ('audit_entries', 'audit_open') ORDER BY table",
        query_params: { db: 'audit_test' }, format: 'JSONEachRow',
      });
      expect(await types.json()).toEqual([
        { table: 'audit_entries', type: 'LowCardinality(String)' }, { table: 'audit_open', type: 'LowCardinality(String)' },
      ]);
    } finally {
      await connection.close();
    }
  });

  it('finds nothing to do when the store is reopened, and keeps the data', async () => {
    const first = await openAuditStore({ target, database: 'audit_test' });
    expect(await first.migrate()).toEqual([]);
    await first.close();
    const second = await openAuditStore({ target, database: 'audit_test' });
    try {
      expect(await second.migrate()).toEqual([]);
      expect(await second.stats({ agentIds: ['none'] })).toEqual({ calls: 0, allowed: 0, denied: 0 });
    } finally {
      await second.close();
    }
  });

  it('creates the table with the engine, partitioning, sort key and skipping indexes the design names', async () => {
    const connection = await connectClickHouse(target);
    try {
      const table = await connection.client.query({
        query: `SELECT name, engine, partition_key, sorting_key FROM system.tables WHERE database = {db:String} AND name IN ('audit_entries', 'audit_open') ORDER BY name`,
        query_params: { db: 'audit_test' },
        format: 'JSONEachRow',
      });
      // One row per entry (decision 035): a plain MergeTree, read without FINAL.
      expect(await table.json()).toEqual([
        { name: 'audit_entries', engine: 'MergeTree', partition_key: 'toYYYYMM(timestamp)', sorting_key: 'toDate(timestamp), agent_id, timestamp, id' },
        { name: 'audit_open', engine: 'MergeTree', partition_key: 'toYYYYMMDD(timestamp)', sorting_key: 'agent_id, timestamp, id' },
      ]);
      const indexes = await connection.client.query({
        query: `SELECT name, type FROM system.data_skipping_indices WHERE database = {db:String} AND table = 'audit_entries' ORDER BY name`,
        query_params: { db: 'audit_test' },
        format: 'JSONEachRow',
      });
      expect(await indexes.json()).toEqual([
        { name: 'member_id_bloom', type: 'bloom_filter' }, { name: 'policy_db_ids_bloom', type: 'bloom_filter' },
        { name: 'shadow_policy_db_ids_bloom', type: 'bloom_filter' },
      ]);
      const columns = await connection.client.query({
        query: `SELECT name, type FROM system.columns WHERE database = {db:String} AND table = 'audit_entries' AND name IN ('timestamp', 'service', 'decision')`,
        query_params: { db: 'audit_test' },
        format: 'JSONEachRow',
      });
      expect(await columns.json()).toEqual([
        { name: 'timestamp', type: "DateTime64(3, 'UTC')" },
        { name: 'service', type: 'LowCardinality(String)' },
        { name: 'decision', type: 'LowCardinality(String)' },
      ]);
    } finally {
      await connection.close();
    }
  });
});

describe('002: the write-ahead stage', () => {
  const target = { kind: 'chdb', path: join(dir.path, 'audit') } as const;
  const [first, second] = readMigrations();

  it('keeps every row written under 001, and a run interrupted after the swap completes on the next start', async () => {
    const connection = await connectClickHouse(target);
    const old = makeEntry({ reason: 'written before 002' });
    try {
      expect(await applyMigrations(connection.client, 'audit_upgrade', [first!])).toEqual([1]);
      const { stage_rank: _rank, ...row001 } = toRow(old);
      await connection.client.insert({ table: 'audit_upgrade.audit_entries', values: [row001], format: 'JSONEachRow' });
      expect(await applyMigrations(connection.client, 'audit_upgrade', [first!, second!])).toEqual([2]);
      // Interrupted after the swap, before its record: the statements run again.
      await connection.client.command({ query: "ALTER TABLE audit_upgrade.schema_migrations DELETE WHERE version = 2 SETTINGS mutations_sync = 1" });
      expect(await applyMigrations(connection.client, 'audit_upgrade', [first!, second!])).toEqual([2]);
    } finally {
      await connection.close();
    }
    const store = await openAuditStore({ target, database: 'audit_upgrade' });
    try {
      const { entries, total } = await store.query({ agentIds: [old.agentId] }, { limit: 10, offset: 0 });
      expect(total).toBe(1);
      expect(entries).toEqual([old]);
    } finally {
      await store.close();
    }
  });
});

describe('003: one row per entry', () => {
  const target = { kind: 'chdb', path: join(dir.path, 'audit') } as const;
  const [first, second, third] = readMigrations();

  it('keeps each entry once, and an orphaned write-ahead record open and visible', async () => {
    const agentId = 'agent-003';
    const completed = makeEntry({ agentId, timestamp: '2026-10-01T10:00:00.000Z', reason: 'No forbid policy matched' });
    const orphan = makeEntry({ agentId, timestamp: '2026-10-01T10:00:01.000Z', stage: 'decision', reason: 'No forbid policy matched; outcome not recorded' });
    const connection = await connectClickHouse(target);
    try {
      expect(await applyMigrations(connection.client, 'audit_003', [first!, second!])).toEqual([1, 2]);
      const rows = [toRow({ ...completed, stage: 'decision' }), toRow(completed), toRow(completed), toRow(orphan)];
      await connection.client.insert({ table: 'audit_003.audit_entries', values: rows, format: 'JSONEachRow' });
      expect(await applyMigrations(connection.client, 'audit_003', [first!, second!, third!])).toEqual([3]);
      const counted = await connection.client.query({
        query: "SELECT (SELECT count() FROM audit_003.audit_entries) AS main, (SELECT count() FROM audit_003.audit_open) AS open", format: 'JSONEachRow',
      });
      expect(await counted.json()).toEqual([{ main: 1, open: 1 }]);
    } finally {
      await connection.close();
    }
    const store = await openAuditStore({ target, database: 'audit_003' });
    try {
      const { entries, total } = await store.query({ agentIds: [agentId] }, { limit: 10, offset: 0 });
      expect(total).toBe(2);
      expect(entries).toEqual([orphan, completed]);
    } finally {
      await store.close();
    }
  });
});

describe('openAuditStore', () => {
  it('keeps entries AUDIT_RETENTION_DAYS days when set (a TTL), and indefinitely once unset', async () => {
    const target = { kind: 'chdb', path: join(dir.path, 'audit') } as const;
    const day = 86_400_000;
    const old = makeEntry({ agentId: 'agent-ttl', timestamp: new Date(Date.now() - 40 * day).toISOString() });
    const recent = makeEntry({ agentId: 'agent-ttl', timestamp: new Date(Date.now() - 2 * day).toISOString() });
    const ttlOf = async () => {
      const connection = await connectClickHouse(target);
      try {
        const r = await connection.client.query({ query: "SELECT engine_full FROM system.tables WHERE database = 'audit_retention' AND name = 'audit_entries'", format: 'JSONEachRow' });
        return ((await r.json<{ engine_full: string }>())[0]!.engine_full.match(/ TTL (.*?) SETTINGS/) ?? [])[1];
      } finally {
        await connection.close();
      }
    };

    const kept = await openAuditStore({ target, database: 'audit_retention', retentionDays: 30 });
    try {
      await kept.insert([old, recent]);
    } finally {
      await kept.close();
    }
    expect(await ttlOf()).toMatch(/toIntervalDay\(.*30/);
    const connection = await connectClickHouse(target);
    await connection.client.command({ query: 'OPTIMIZE TABLE audit_retention.audit_entries FINAL' });
    await connection.close();
    const reopened = await openAuditStore({ target, database: 'audit_retention', retentionDays: null });
    try {
      const { entries } = await reopened.query({ agentIds: ['agent-ttl'] }, { limit: 10, offset: 0 });
      expect(entries.map((e) => e.id)).toEqual([recent.id]);
    } finally {
      await reopened.close();
    }
    expect(await ttlOf()).toBeUndefined();
  });

  it('refuses a database name that is not an identifier', async () => {
    await expect(openAuditStore({ target: { kind: 'chdb', path: join(dir.path, 'audit') }, database: 'x; DROP' })).rejects.toThrow(/invalid ClickHouse database name/);
  });
});
