import { MCP_PROTOCOL_SERVICE, type AuditEntry, type SessionActivityResponse } from '@portcullis/core';
import { whereOf, type AuditFilter } from './audit-filter.ts';
import { connectClickHouse, type ClickHouseConnection, type ClickHouseTarget } from './clickhouse-connection.ts';
import { AUDIT_COLUMNS, fromClickHouseTime, fromRow, toRow, type AuditRow } from './entry-row.ts';
import { EXPORT_LINE_FORMAT, EXPORT_SETTINGS, exportLineOf, REDACTED_ALIAS } from './export-lines.ts';
import { applyMigrations } from './migrate.ts';

/** A page of a filtered listing. */
export interface AuditPage {
  limit: number;
  offset: number;
}

/** A member identity seen in audit data (its most recent name). */
export interface AuditMember {
  memberId: string;
  memberName: string;
}

export interface AuditStats {
  calls: number;
  allowed: number;
  denied: number;
}

/** How often one policy matched a call, and when it last did (ISO 8601). */
export interface PolicyTriggerCount {
  policyDbId: string;
  count: number;
  lastTriggered: string;
}

/** One member's activity in the given agents' entries (`lastCallAt` ISO 8601). */
export interface MemberActivity {
  memberId: string;
  memberName: string;
  calls: number;
  allowed: number;
  denied: number;
  lastCallAt: string;
}

/** The time-range part of a filter, as dashboard counters use it. */
export type AuditStatsFilter = Pick<AuditFilter, 'agentIds' | 'from' | 'to'>;

/** The audit table: one SQL module over a ClickHouse server or embedded chDB. */
export interface AuditStore {
  readonly kind: ClickHouseTarget['kind'];
  readonly database: string;
  /** Writes a batch as one INSERT; an entry written twice is still read once. */
  insert(entries: readonly AuditEntry[]): Promise<void>;
  /** Newest first (`timestamp DESC, id DESC`), with the count of every match. */
  query(filter: AuditFilter, page: AuditPage): Promise<{ entries: AuditEntry[]; total: number }>;
  /**
   * The export body (without the CSV header): every match (or `limit` of them, `0` = all,
   * after `offset`) as CSV records or NDJSON lines, formatted by the engine and yielded as
   * raw byte chunks as they arrive. Rows come in the table's own order,
   * `(agent_id, timestamp, id)`, read in order rather than sorted, so memory stays flat
   * however many rows match. See `export-lines.ts` for the exact text.
   */
  exportLines(filter: AuditFilter, page: AuditPage, options: ExportOptions): AsyncIterable<Uint8Array>;
  /**
   * The same read as entries (the NDJSON export, parsed), in batches as they arrive: for
   * callers that need whole entries in the table's order rather than export text.
   */
  stream(filter: AuditFilter, page: AuditPage): AsyncIterable<AuditEntry[]>;
  /** Distinct members in the given agents' entries, by name. */
  members(agentIds: readonly string[]): Promise<AuditMember[]>;
  stats(filter: AuditStatsFilter): Promise<AuditStats>;
  /**
   * For each of `policyDbIds` that matched at least one of the agent's entries: how many
   * entries name it in `policy_db_ids`, and the newest one's time. Ids never matched are left out.
   */
  policyTriggers(agentId: string, policyDbIds: readonly string[]): Promise<PolicyTriggerCount[]>;
  /**
   * Per member in the given agents' entries (optionally within an inclusive time range):
   * calls, allowed, denied, newest call and most recent name. Most calls first, then member id.
   */
  memberStats(filter: AuditStatsFilter): Promise<MemberActivity[]>;
  /** One tool session's calls: totals, per tool, and per matched policy. */
  sessionActivity(agentId: string, sessionId: string): Promise<SessionActivityResponse>;
  /** Applies pending migrations (already done by `openAuditStore`); returns the versions applied. */
  migrate(): Promise<number[]>;
  /**
   * Keeps entries `days` days (a table TTL on `timestamp`), or indefinitely with `null` (any
   * TTL removed). Done by `openAuditStore` when `retentionDays` is given.
   */
  setRetention(days: number | null): Promise<void>;
  close(): Promise<void>;
}

/** How `exportLines` writes rows. */
export interface ExportOptions {
  format: 'csv' | 'ndjson';
  /** Agents whose entries are exported with every policy identity emptied. */
  redactPolicyAgentIds: readonly string[];
}

export interface AuditStoreOptions {
  target: ClickHouseTarget;
  database: string;
  /** `AUDIT_RETENTION_DAYS`: a number of days, or `null` for indefinite; omitted leaves the table as it is. */
  retentionDays?: number | null;
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;
const TABLE = '{database:Identifier}.audit_entries';
const SELECT_COLUMNS = AUDIT_COLUMNS.join(', ');
/**
 * Reads use FINAL rather than `LIMIT 1 BY id`: every copy of a redelivered entry has the
 * same sort key, so FINAL collapses exactly those copies while merging parts in key order.
 * That keeps an export a streaming merge (LIMIT 1 BY id would keep a set of every id seen,
 * growing with the export) and lets `count()` and OFFSET see each id once without a
 * subquery. `use_skip_indexes_if_final` (on by default) keeps the bloom filters in play.
 */
const FROM_FINAL = `FROM ${TABLE} FINAL`;
/** Call counters count tool calls only: refused protocol requests (decision 001) are audited, not calls. */
const TOOL_CALLS_ONLY = { sql: 'service != {protocolService:String}', params: { protocolService: MCP_PROTOCOL_SERVICE } };

/** Connects, applies pending migrations and returns the store. */
export async function openAuditStore(options: AuditStoreOptions): Promise<AuditStore> {
  if (!IDENTIFIER.test(options.database)) throw new Error(`invalid ClickHouse database name: ${JSON.stringify(options.database)}`);
  const connection = await connectClickHouse(options.target);
  const store = createAuditStore(connection, options.database);
  try {
    await store.migrate();
    if (options.retentionDays !== undefined) await store.setRetention(options.retentionDays);
  } catch (err) {
    await connection.close().catch(() => undefined);
    throw err;
  }
  return store;
}

function createAuditStore(connection: ClickHouseConnection, database: string): AuditStore {
  const { client } = connection;
  const base = { database };

  const selectRows = async <T>(query: string, params: Record<string, unknown>): Promise<T[]> => {
    const result = await client.query({ query, query_params: { ...base, ...params }, format: 'JSONEachRow' });
    return result.json<T>();
  };

  async function* exportLines(filter: AuditFilter, page: AuditPage, options: ExportOptions): AsyncIterable<Uint8Array> {
    if (filter.agentIds.length === 0) return;
    const where = whereOf(filter);
    const limit = page.limit > 0 ? 'LIMIT {limit:UInt64} ' : '';
    yield* connection.streamRaw(
      `WITH ${REDACTED_ALIAS}
       SELECT ${exportLineOf(options.format)} AS line ${FROM_FINAL} WHERE ${where.sql}
       ORDER BY agent_id, timestamp, id ${limit}OFFSET {offset:UInt64} ${EXPORT_SETTINGS}`,
      { ...base, ...where.params, limit: page.limit, offset: page.offset, redactAgentIds: [...options.redactPolicyAgentIds] },
      EXPORT_LINE_FORMAT,
    );
  }

  return {
    kind: connection.kind,
    database,

    async insert(entries) {
      if (entries.length === 0) return;
      await client.insert({ table: `${database}.audit_entries`, values: entries.map(toRow), format: 'JSONEachRow' });
    },

    async query(filter, page) {
      if (filter.agentIds.length === 0) return { entries: [], total: 0 };
      const where = whereOf(filter);
      const [rows, counted] = await Promise.all([
        selectRows<AuditRow>(
          `SELECT ${SELECT_COLUMNS} ${FROM_FINAL} WHERE ${where.sql}
           ORDER BY timestamp DESC, id DESC LIMIT {limit:UInt32} OFFSET {offset:UInt64}`,
          { ...where.params, limit: page.limit, offset: page.offset },
        ),
        selectRows<{ total: number | string }>(`SELECT count() AS total ${FROM_FINAL} WHERE ${where.sql}`, where.params),
      ]);
      return { entries: rows.map(fromRow), total: Number(counted[0]?.total ?? 0) };
    },

    exportLines,

    async *stream(filter, page) {
      const decoder = new TextDecoder();
      let partial = '';
      for await (const chunk of exportLines(filter, page, { format: 'ndjson', redactPolicyAgentIds: [] })) {
        const lines = (partial + decoder.decode(chunk, { stream: true })).split('\n');
        partial = lines.pop() ?? '';
        if (lines.length > 0) yield lines.map((line) => JSON.parse(line) as AuditEntry);
      }
    },

    async members(agentIds) {
      if (agentIds.length === 0) return [];
      // No FINAL: copies of an entry carry the same member, so grouping already collapses them.
      // The alias differs from the column: an alias named `member_name` would shadow the
      // column inside argMax on servers that resolve aliases first.
      const rows = await selectRows<{ member_id: string; latest_name: string }>(
        `SELECT member_id, argMax(member_name, timestamp) AS latest_name FROM ${TABLE}
         WHERE agent_id IN {agentIds:Array(String)}
         GROUP BY member_id ORDER BY latest_name, member_id`,
        { agentIds: [...agentIds] },
      );
      return rows.map((row) => ({ memberId: row.member_id, memberName: row.latest_name }));
    },

    async stats(filter) {
      if (filter.agentIds.length === 0) return { calls: 0, allowed: 0, denied: 0 };
      const where = whereOf({ agentIds: filter.agentIds, from: filter.from, to: filter.to });
      const [row] = await selectRows<{ calls: number | string; allowed: number | string; denied: number | string }>(
        `SELECT count() AS calls, countIf(decision = 'ALLOW') AS allowed, countIf(decision = 'DENY') AS denied
         ${FROM_FINAL} WHERE ${where.sql} AND ${TOOL_CALLS_ONLY.sql}`,
        { ...where.params, ...TOOL_CALLS_ONLY.params },
      );
      return { calls: Number(row?.calls ?? 0), allowed: Number(row?.allowed ?? 0), denied: Number(row?.denied ?? 0) };
    },

    async policyTriggers(agentId, policyDbIds) {
      if (policyDbIds.length === 0) return [];
      // FINAL first, so a redelivered entry counts once; `hasAny` lets the policy_db_ids
      // bloom filter skip granules before ARRAY JOIN unfolds the matches.
      const rows = await selectRows<{ policy_db_id: string; n: number | string; last: string }>(
        `SELECT policy_db_id, count() AS n, toString(max(timestamp)) AS last
         ${FROM_FINAL} ARRAY JOIN policy_db_ids AS policy_db_id
         WHERE agent_id = {agentId:String} AND hasAny(policy_db_ids, {policyDbIds:Array(String)})
           AND policy_db_id IN {policyDbIds:Array(String)}
         GROUP BY policy_db_id ORDER BY policy_db_id`,
        { agentId, policyDbIds: [...policyDbIds] },
      );
      return rows.map((row) => ({ policyDbId: row.policy_db_id, count: Number(row.n), lastTriggered: fromClickHouseTime(row.last) }));
    },

    async memberStats(filter) {
      if (filter.agentIds.length === 0) return [];
      const where = whereOf({ agentIds: filter.agentIds, from: filter.from, to: filter.to });
      // FINAL: a redelivered entry must count once. `latest_name`, not `member_name`: an alias
      // named like the column would shadow it inside argMax (see `members`).
      const rows = await selectRows<{ member_id: string; latest_name: string; calls: number | string; allowed: number | string; denied: number | string; last: string }>(
        `SELECT member_id, argMax(member_name, timestamp) AS latest_name, count() AS calls,
                countIf(decision = 'ALLOW') AS allowed, countIf(decision = 'DENY') AS denied, toString(max(timestamp)) AS last
         ${FROM_FINAL} WHERE ${where.sql} AND ${TOOL_CALLS_ONLY.sql}
         GROUP BY member_id ORDER BY calls DESC, member_id`,
        { ...where.params, ...TOOL_CALLS_ONLY.params },
      );
      return rows.map((row) => ({
        memberId: row.member_id, memberName: row.latest_name,
        calls: Number(row.calls), allowed: Number(row.allowed), denied: Number(row.denied), lastCallAt: fromClickHouseTime(row.last),
      }));
    },

    async sessionActivity(agentId, sessionId) {
      // Tool calls only, as every call counter counts them (protocol requests are audited apart, decision 025).
      const params = { agent: agentId, session: sessionId, ...TOOL_CALLS_ONLY.params };
      const scope = `${FROM_FINAL} WHERE agent_id = {agent:String} AND session_id = {session:String} AND ${TOOL_CALLS_ONLY.sql}`;
      type Counts = { calls: number | string; allowed: number | string; denied: number | string };
      const counts = (row: Counts) => ({ calls: Number(row.calls), allowed: Number(row.allowed), denied: Number(row.denied) });
      const tally = "count() AS calls, countIf(decision = 'ALLOW') AS allowed, countIf(decision = 'DENY') AS denied";
      const [[total], tools, policies] = await Promise.all([
        selectRows<Counts & { first: string; last: string }>(`SELECT ${tally}, toString(min(timestamp)) AS first, toString(max(timestamp)) AS last ${scope}`, params),
        selectRows<Counts & { service: string; tool: string }>(`SELECT service, tool, ${tally} ${scope} GROUP BY service, tool ORDER BY calls DESC, service, tool`, params),
        // Keys and names sit at the same index as the database id in their arrays.
        selectRows<{ policy_db_id: string; policy_key: string; policy_name: string; hits: number | string }>(
          `SELECT policy_db_id, argMax(matched_policy_ids[indexOf(policy_db_ids, policy_db_id)], timestamp) AS policy_key,
                  argMax(matched_policy_names[indexOf(policy_db_ids, policy_db_id)], timestamp) AS policy_name, count() AS hits
           ${scope.replace(' WHERE ', ' ARRAY JOIN policy_db_ids AS policy_db_id WHERE ')}
           GROUP BY policy_db_id ORDER BY hits DESC, policy_db_id`, params),
      ]);
      const none = !total || Number(total.calls) === 0;
      return {
        ...counts(total ?? { calls: 0, allowed: 0, denied: 0 }),
        firstCallAt: none ? '' : fromClickHouseTime(total.first),
        lastCallAt: none ? '' : fromClickHouseTime(total.last),
        tools: tools.map((t) => ({ service: t.service, tool: t.tool, ...counts(t) })),
        policies: policies.map((p) => ({ policyDbId: p.policy_db_id, policyKey: p.policy_key, policyName: p.policy_name, hits: Number(p.hits) })),
      };
    },

    migrate: () => applyMigrations(client, database),

    async setRetention(days) {
      if (days !== null) {
        await client.command({ query: `ALTER TABLE ${TABLE} MODIFY TTL toDateTime(timestamp) + toIntervalDay({days:UInt32})`, query_params: { ...base, days } });
        return;
      }
      const [table] = await selectRows<{ ttl: number | string }>(
        `SELECT position(engine_full, ' TTL ') > 0 AS ttl FROM system.tables WHERE database = {database:String} AND name = 'audit_entries'`, {});
      if (Number(table?.ttl)) await client.command({ query: `ALTER TABLE ${TABLE} REMOVE TTL`, query_params: base });
    },

    close: () => connection.close(),
  };
}
