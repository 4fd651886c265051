import { APPROVAL_EVENTS_NOT_CALLS, GATEWAY_ACTION_TYPE, NO_CONNECTOR_CALL_ACTION, UPSTREAM_ERROR_MARKER, type AuditEntry, type SessionActivityResponse } from '@portcullis/core';
import { whereOf, type AuditFilter, type BoundWhere, type ResolvedFilter } from './audit-filter.ts';
import { connectClickHouse, type ClickHouseConnection, type ClickHouseTarget } from './clickhouse-connection.ts';
import { AUDIT_COLUMNS, CANONICAL_UTC, fromClickHouseTime, fromRow, toClickHouseTime, type AuditRow } from './entry-row.ts';
import { EXPORT_LINE_FORMAT, EXPORT_SETTINGS, exportLineOf, REDACTED_ALIAS } from './export-lines.ts';
import { applyMigrations } from './migrate.ts';
import {
  DELETE_CLOSED_SQL, DELETE_ORPHANS_SQL, DELETE_SETTLED_SQL, EXISTING_ROWS_SQL, openRowsSql, settleOrphansSql,
} from './open-records.ts';
import { newestFirstPage } from './newest-first.ts';
import { timeBucketsOf } from './time-buckets.ts';

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
/** What one shadow policy would have changed since `since` (`ShadowResults`, decision 062). */
export interface ShadowResults {
  /** Entries of the agent since `since` that carry a shadow verdict. */
  evaluated: number;
  /** Of those, the entries whose shadow verdict this policy decided. */
  matched: number;
  allowToDeny: number;
  denyToAllow: number;
  /** Changed entries, newest first. */
  samples: Array<{ entryId: string; timestamp: string; memberId: string; memberName: string; service: string; tool: string; decision: string; shadowDecision: string }>;
  /** Newest matched entry's time; '' when none. */
  lastMatched: string;
}

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

/** Entries and denies per time bucket; `start` ISO 8601, every bucket of the range, oldest first. */
export interface AuditHistogram {
  bucketSeconds: number;
  buckets: Array<{ start: string; calls: number; denies: number }>;
}

/** What the home overview reads: the agents and range of the counters, which agents' policies it may name, rows per list. */
export interface OverviewFilter extends AuditStatsFilter {
  /** Of `agentIds`, the agents whose policies may be named (the others' policy identities are hidden, decision 022). */
  policyAgentIds: readonly string[];
  /** Rows per list. */
  top: number;
}

/** The dashboard's home overview (decision 037): every figure over the tool calls among the entries `query` lists (decision 071). */
export interface AuditOverview {
  series: AuditHistogram;
  calls: number;
  denies: number;
  topDeniedTools: Array<{ service: string; tool: string; denies: number }>;
  topDeniedPolicies: Array<{ policyDbId: string; policyKey: string; policyName: string; agentId: string; denies: number }>;
  /** A member id is one person's membership of one agent: `agentId` says which. */
  memberDenyRates: Array<{ memberId: string; memberName: string; agentId: string; calls: number; denies: number }>;
  agentsWithErrors: Array<{ agentId: string; agentName: string; errors: number; lastErrorAt: string }>;
}

/** The audit table: one SQL module over a ClickHouse server or embedded chDB. */
export interface AuditStore {
  readonly kind: ClickHouseTarget['kind'];
  readonly database: string;
  /**
   * Writes a batch: each entry once in `audit_entries`, write-ahead records without their
   * completion in the batch to `audit_open` (see `open-records.ts`). Entries already stored
   * (a redelivered batch, a publish retried across a NATS leader change) are left out.
   * Writers call `insert` and `tidyOpenRecords` one at a time across every process (the audit
   * writer's insert lock): each reads what it is about to change first.
   * `encoded[i]`, when given, is `entries[i]` as JSON text (the bytes the bus carried): it is
   * handed to the engine as it is instead of being serialised again.
   */
  insert(entries: readonly AuditEntry[], encoded?: readonly Uint8Array[]): Promise<void>;
  /**
   * Housekeeping of `audit_open`: deletes the records whose completion was written and, with
   * `settleBefore`, settles the open ones older than it into `audit_entries` as orphans.
   * With `returnSettled`, resolves to the orphans it settled (for the audit sinks, decision 055).
   */
  tidyOpenRecords(options: { settleBefore?: Date; returnSettled?: boolean }): Promise<AuditEntry[]>;
  /** The filter with its name substrings resolved to agent ids and tool names; `undefined` if nothing can match. */
  resolveFilter(filter: AuditFilter): Promise<ResolvedFilter | undefined>;
  /** Newest first (`timestamp DESC, id DESC`), with the count of every match. */
  query(filter: AuditFilter, page: AuditPage): Promise<{ entries: AuditEntry[]; total: number }>;
  /**
   * The export body (without the CSV header): every match (or `limit` of them, `0` = all,
   * after `offset`) as CSV records or NDJSON lines, formatted by the engine and yielded as
   * raw byte chunks as they arrive. Rows come in `query`'s order, newest first
   * (`timestamp DESC, id DESC`), so an export page is the list's page (decision 071); the
   * engine sorts with a bounded buffer that spills to disk (`EXPORT_SETTINGS`), so memory
   * stays flat however many rows match. See `export-lines.ts` for the exact text.
   */
  exportLines(filter: AuditFilter, page: AuditPage, options: ExportOptions): AsyncIterable<Uint8Array>;
  /**
   * The same read as entries (the NDJSON export, parsed), in batches as they arrive: for
   * callers that need whole entries, newest first, rather than export text.
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
   * One shadow policy's results over the agent's completed entries since `since`: counts of
   * the calls whose shadow verdict it decided, of those it would have changed either way, and
   * up to `sampleLimit` changed ones, newest first (decision 062).
   */
  shadowResults(agentId: string, policyDbId: string, since: Date, sampleLimit: number): Promise<ShadowResults>;
  /**
   * Per member in the given agents' entries (optionally within an inclusive time range):
   * calls, allowed, denied, newest call and most recent name. Most calls first, then member id.
   */
  memberStats(filter: AuditStatsFilter): Promise<MemberActivity[]>;
  /** One tool session's calls: totals, per tool, and per matched policy. */
  sessionActivity(agentId: string, sessionId: string): Promise<SessionActivityResponse>;
  /**
   * Entries and denies per time bucket of the entries `query` would list for `filter`, so the
   * buckets add up to its `total`. The buckets cover the filter's range; a missing bound is
   * the oldest match (no match: no buckets) or the later of now and the newest match.
   */
  histogram(filter: AuditFilter): Promise<AuditHistogram>;
  /** The home overview over the given agents and range (decision 037), of tool calls only, as `stats` counts them (decision 071). */
  overview(filter: OverviewFilter): Promise<AuditOverview>;
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
/** Rollup pairs a store remembers having written (agents × names and tools are far fewer). */
const MAX_REMEMBERED_NAMES = 100_000;
/**
 * How `audit_ingest` reads the entries' JSON: objects (`toolArgs`) as their JSON text, ISO 8601
 * timestamps, fields it has no column for (`traceparent`) skipped.
 */
const INGEST_SETTINGS = { input_format_parallel_parsing: 0, input_format_json_read_objects_as_strings: 1, date_time_input_format: 'best_effort', input_format_skip_unknown_fields: 1 };
const TABLE = '{database:Identifier}.audit_entries';
const SELECT_COLUMNS = AUDIT_COLUMNS.join(', ');
/** The list's order (`query`, `newestFirstPage`), which exports keep too (decision 071). */
const LIST_ORDER = 'timestamp DESC, id DESC';
/**
 * Every entry matching `where`: the main table, which holds each entry once (no FINAL), and
 * the open write-ahead records (decision 035). For aggregates over all entries.
 */
const entriesWhere = (where: string) =>
  `(SELECT ${SELECT_COLUMNS} FROM ${TABLE} WHERE ${where} UNION ALL ${openRowsSql(SELECT_COLUMNS, where)})`;
/** One row if `audit_open` holds any record, else none. */
const ANY_OPEN_SQL = 'SELECT 1 FROM {database:Identifier}.audit_open LIMIT 1';
/** The same for some agents only: another tenant's calls in flight cost a page read nothing (decision 069). */
const ANY_OPEN_OF_AGENTS_SQL = 'SELECT 1 FROM {database:Identifier}.audit_open WHERE agent_id IN {openAgentIds:Array(String)} LIMIT 1';
/** The outer query's source: the given columns (never `id`) of every entry matching `where`, each once, as `query` counts them. */
const entriesOnce = (columns: string, where: string, withOpen: boolean) => (withOpen
  ? `(SELECT ${columns} FROM ${TABLE} WHERE ${where} UNION ALL SELECT ${columns} FROM (${openRowsSql(`id, ${columns}`, where)} LIMIT 1 BY id))`
  : `(SELECT ${columns} FROM ${TABLE} WHERE ${where})`);
/**
 * The one definition of a call, used by every call counter (stats, member stats, session
 * activity, the home overview; decision 071): an entry is a tool call unless it records a
 * protocol request — an action of the proxy's own namespace other than `tools/call`
 * (`isProtocolRequest` in core; entries of decision 025's `mcp` service carry such an action
 * too) — or an owner's approval decision, an approval's expiry or an approved call's return,
 * which are events, not calls (decision 063). A tool call with an unknown name is a call.
 */
const TOOL_CALLS_ONLY = {
  sql: `NOT (startsWith(action, {gatewayActions:String}) AND action != {noConnectorCall:String})
    AND approval_event NOT IN {approvalNotCalls:Array(String)}`,
  params: { gatewayActions: `${GATEWAY_ACTION_TYPE}::`, noConnectorCall: NO_CONNECTOR_CALL_ACTION, approvalNotCalls: [...APPROVAL_EVENTS_NOT_CALLS] },
};
/** `where` narrowed to tool calls (`TOOL_CALLS_ONLY`). */
const callsOf = (where: BoundWhere): BoundWhere => ({ sql: `${where.sql} AND ${TOOL_CALLS_ONLY.sql}`, params: { ...where.params, ...TOOL_CALLS_ONLY.params } });

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
  const command = (query: string, params: Record<string, unknown>) => client.command({ query, query_params: { ...base, ...params } });

  async function resolveFilter(filter: AuditFilter): Promise<ResolvedFilter | undefined> {
    const { agent, tool, agentIdsByCurrentName, ...rest } = filter;
    if (rest.agentIds.length === 0) return undefined;
    // Agents and tools are few: a substring becomes an IN list on the sort key / a low-cardinality column.
    const [named, tools] = await Promise.all([
      agent === undefined ? undefined : selectRows<{ agent_id: string }>(
        `SELECT DISTINCT agent_id FROM {database:Identifier}.audit_agent_names
         WHERE agent_id IN {agentIds:Array(String)} AND positionCaseInsensitiveUTF8(agent_name, {agent:String}) > 0`,
        { agentIds: [...rest.agentIds], agent }),
      tool === undefined ? undefined : selectRows<{ tool: string }>(
        `SELECT DISTINCT tool FROM {database:Identifier}.audit_tool_names WHERE positionCaseInsensitiveUTF8(tool, {tool:String}) > 0`,
        { tool }),
    ]);
    let agentIds = rest.agentIds;
    if (named) {
      const matching = new Set([...named.map((row) => row.agent_id), ...(agentIdsByCurrentName ?? [])]);
      agentIds = agentIds.filter((id) => matching.has(id));
    }
    if (agentIds.length === 0 || tools?.length === 0) return undefined;
    return { ...rest, agentIds, ...(tools ? { tools: tools.map((row) => row.tool) } : {}) };
  }

  /** Whether `audit_open` holds any record (most of the time it does not, and reads skip it). */
  const anyOpen = async () => (await selectRows(ANY_OPEN_SQL, {})).length > 0;

  /**
   * The histogram of the entries matching `where` (undefined: none can match) within the
   * inclusive range. Each row falls in bucket `intDiv(ms - origin, width)`, every value bound.
   */
  async function histogramOf(where: BoundWhere | undefined, from: Date | undefined, to: Date | undefined, withOpen: boolean): Promise<AuditHistogram> {
    const source = where && entriesOnce('timestamp, decision', where.sql, withOpen);
    let lo = from?.getTime(), hi = to?.getTime();
    if (source && (lo === undefined || hi === undefined)) {
      const [span] = await selectRows<{ n: number | string; lo: number | string; hi: number | string }>(
        `SELECT count() AS n, toUnixTimestamp64Milli(min(timestamp)) AS lo, toUnixTimestamp64Milli(max(timestamp)) AS hi FROM ${source}`, where.params);
      if (Number(span?.n ?? 0) > 0) {
        lo ??= Number(span!.lo);
        hi ??= Math.max(Number(span!.hi), Date.now());
      }
    }
    if (lo === undefined) return { bucketSeconds: 60, buckets: [] };
    hi = Math.max(lo, hi ?? Date.now());
    const b = timeBucketsOf(lo, hi);
    const counts = Array.from({ length: b.count }, () => ({ calls: 0, denies: 0 }));
    if (source) {
      const rows = await selectRows<{ bucket: number | string; calls: number | string; denies: number | string }>(
        `SELECT intDiv(toUnixTimestamp64Milli(timestamp) - {bucketOrigin:Int64}, {bucketMs:Int64}) AS bucket,
                count() AS calls, countIf(decision = 'DENY') AS denies
         FROM ${source} GROUP BY bucket ORDER BY bucket`,
        { ...where.params, bucketOrigin: b.originMs, bucketMs: b.bucketMs });
      for (const row of rows) {
        // Every match lies in the range by construction; the clamp only guarantees the sum.
        const slot = counts[Math.min(Math.max(Number(row.bucket), 0), b.count - 1)]!;
        slot.calls += Number(row.calls);
        slot.denies += Number(row.denies);
      }
    }
    return {
      bucketSeconds: b.bucketMs / 1000,
      buckets: counts.map((c, i) => ({ start: new Date(b.originMs + i * b.bucketMs).toISOString(), ...c })),
    };
  }

  async function* exportLines(filter: AuditFilter, page: AuditPage, options: ExportOptions): AsyncIterable<Uint8Array> {
    const resolved = await resolveFilter(filter);
    if (!resolved) return;
    const where = whereOf(resolved);
    const limit = page.limit > 0 ? 'LIMIT {limit:UInt64} ' : '';
    const params = { ...base, ...where.params, limit: page.limit, offset: page.offset, redactAgentIds: [...options.redactPolicyAgentIds] };
    // The list's order (`query`): newest first, calls still open interleaved by time, so a
    // page (limit/offset) of the export is the same page of the list (decision 071).
    const source = await anyOpen()
      ? `(SELECT ${SELECT_COLUMNS} FROM ${TABLE} WHERE ${where.sql} UNION ALL SELECT ${SELECT_COLUMNS} FROM (${openRowsSql(SELECT_COLUMNS, where.sql)} LIMIT 1 BY id))`
      : `${TABLE} WHERE ${where.sql}`;
    yield* connection.streamRaw(
      `WITH ${REDACTED_ALIAS}
       SELECT ${exportLineOf(options.format)} AS line FROM ${source}
       ORDER BY ${LIST_ORDER} ${limit}OFFSET {offset:UInt64} ${EXPORT_SETTINGS}`,
      params, EXPORT_LINE_FORMAT,
    );
  }

  /**
   * One INSERT of the chosen entries into `audit_ingest` (migration 009), whose views write each
   * to `audit_entries` or, a write-ahead record, to `audit_open`: the JSON text of each, one per
   * line, parsed by the engine. The bus's own bytes are used where the entry's timestamp is
   * already UTC to the millisecond (the gateway writes every one so); otherwise, and for
   * entries given without bytes, the entry is serialised with its timestamp normalised.
   */
  async function insertEntries(chosen: readonly AuditEntry[], bytesOf: ReadonlyMap<AuditEntry, Uint8Array>): Promise<void> {
    const lines: Uint8Array[] = [];
    let length = 0;
    for (const entry of chosen) {
      const bytes = bytesOf.get(entry);
      const line = bytes && CANONICAL_UTC.test(entry.timestamp) ? bytes : Buffer.from(JSON.stringify({ ...entry, timestamp: new Date(entry.timestamp).toISOString() }));
      lines.push(line);
      length += line.length + 1;
    }
    const body = Buffer.allocUnsafe(length);
    let at = 0;
    for (const line of lines) {
      body.set(line, at);
      at += line.length;
      body[at++] = 0x0a;
    }
    await connection.insertJsonLines(`${database}.audit_ingest`, body, INGEST_SETTINGS);
  }

  /** The bound parameters that find `entries` by key: their agents, time span and ids. */
  const keysOf = (entries: readonly AuditEntry[]) => {
    const times = entries.map((e) => Date.parse(e.timestamp));
    return {
      agentIds: [...new Set(entries.map((e) => e.agentId))], ids: entries.map((e) => e.id),
      from: toClickHouseTime(new Date(Math.min(...times))), to: toClickHouseTime(new Date(Math.max(...times))),
    };
  };

  /**
   * The (agent, name) and (service, tool) pairs of `entries` that this store has not written to
   * the rollups yet, written now (migration 005: no views). Before the entries, so an entry a
   * reader can see is always found by its names. Another writer, or this one after a restart,
   * may write a pair again: the rollups collapse repeats.
   */
  const namesWritten = new Set<string>();
  async function recordNames(entries: readonly AuditEntry[]): Promise<void> {
    const agents = new Map<string, [string, string]>();
    const tools = new Map<string, [string, string]>();
    for (const e of entries) {
      const agent = `a\u0000${e.agentId}\u0000${e.agentName}`;
      if (!namesWritten.has(agent)) agents.set(agent, [e.agentId, e.agentName]);
      const tool = `t\u0000${e.service}\u0000${e.tool}`;
      if (!namesWritten.has(tool)) tools.set(tool, [e.service, e.tool]);
    }
    await Promise.all([
      agents.size > 0 && client.insert({ table: `${database}.audit_agent_names`, columns: ['agent_id', 'agent_name'], format: 'JSONCompactEachRow', values: [...agents.values()] }),
      tools.size > 0 && client.insert({ table: `${database}.audit_tool_names`, columns: ['service', 'tool'], format: 'JSONCompactEachRow', values: [...tools.values()] }),
    ]);
    // Bounded: past this many pairs the set starts over (a repeat costs one small insert).
    if (namesWritten.size > MAX_REMEMBERED_NAMES) namesWritten.clear();
    for (const key of [...agents.keys(), ...tools.keys()]) namesWritten.add(key);
  }

  /** Ids of `entries` already in the main table, with their stage (0 = a settled orphan). */
  async function storedStages(entries: readonly AuditEntry[]): Promise<Map<string, number>> {
    if (entries.length === 0) return new Map();
    const rows = await selectRows<{ id: string; stage_rank: number | string }>(EXISTING_ROWS_SQL, keysOf(entries));
    return new Map(rows.map((row) => [row.id, Number(row.stage_rank)]));
  }

  return {
    kind: connection.kind,
    database,

    async insert(entries, encoded) {
      if (entries.length === 0) return;
      // Each id once per stage (a batch may hold two copies), and a decision record whose
      // completion is in the batch is not needed at all.
      const onePerId = (list: readonly AuditEntry[]) => [...new Map(list.map((e) => [e.id, e])).values()];
      let finals = onePerId(entries.filter((e) => e.stage !== 'decision'));
      const completed = new Set(finals.map((e) => e.id));
      let open = onePerId(entries.filter((e) => e.stage === 'decision' && !completed.has(e.id)));

      // Every batch is probed for ids already stored: JetStream marks a redelivery, but a copy
      // can also arrive as a first delivery (a publish retried across a NATS leader change, seen
      // in the fault test), and a probe bounded by the batch's agents and time span is cheap.
      const stored = await storedStages(entries);
      await recordNames(entries);
      // A completion whose decision record was settled as an orphan (a late completion) replaces the orphan.
      const orphans = finals.filter((e) => stored.get(e.id) === 0);
      if (orphans.length > 0) await command(DELETE_ORPHANS_SQL, keysOf(orphans));
      finals = finals.filter((e) => stored.get(e.id) !== 1);
      open = open.filter((e) => !stored.has(e.id));
      const chosen = [...finals, ...open];
      if (chosen.length === 0) return;
      const bytesOf = new Map<AuditEntry, Uint8Array>();
      if (encoded) entries.forEach((entry, i) => { if (encoded[i]) bytesOf.set(entry, encoded[i]); });
      await insertEntries(chosen, bytesOf);
    },

    async tidyOpenRecords({ settleBefore, returnSettled }) {
      const [row] = await selectRows<{ n: number | string }>('SELECT count() AS n FROM {database:Identifier}.audit_open', {});
      if (Number(row?.n ?? 0) === 0) return [];
      let settled: AuditEntry[] = [];
      // Settling first: its NOT IN skips what is closed, and a run cut short is repeated safely
      // (what it settled is closed by then).
      if (settleBefore) {
        const cutoff = toClickHouseTime(settleBefore);
        // Read under the same insert lock as the settle below, so these are exactly what it settles.
        if (returnSettled) {
          settled = (await selectRows<AuditRow>(`${openRowsSql(SELECT_COLUMNS, "timestamp < {cutoff:DateTime64(3, 'UTC')}")} ORDER BY timestamp LIMIT 1 BY id`, { cutoff })).map(fromRow);
        }
        await command(settleOrphansSql(SELECT_COLUMNS), { cutoff });
        await command(DELETE_SETTLED_SQL, { cutoff });
      }
      await command(DELETE_CLOSED_SQL, {});
      return settled;
    },

    resolveFilter,

    async query(filter, page) {
      const resolved = await resolveFilter(filter);
      if (!resolved) return { entries: [], total: 0 };
      const where = whereOf(resolved);
      const newest = resolved.to ?? new Date();
      const pageOf = (window: AuditPage) => newestFirstPage({
        select: selectRows, table: TABLE, columns: SELECT_COLUMNS, where, page: window, newest,
        fewPerDay: resolved.member !== undefined || resolved.policy !== undefined,
      });
      // `audit_open` is empty most of the time: asking costs under 1 ms, the filtered read of it
      // with its anti-join ~5 ms (chDB runs a process's queries one at a time, so it adds up).
      const openRows = async () => ((await selectRows(ANY_OPEN_OF_AGENTS_SQL, { openAgentIds: [...resolved.agentIds] })).length === 0 ? []
        : selectRows<AuditRow>(`${openRowsSql(SELECT_COLUMNS, where.sql)} ORDER BY timestamp DESC, id DESC LIMIT 1 BY id`, where.params));
      const [main, open] = await Promise.all([pageOf(page), openRows()]);
      const total = main.total + open.length;
      if (open.length === 0) return { entries: main.rows.map(fromRow), total };
      // Calls still open interleave with the page (rarely): read the page's worth from the top and merge.
      const top = page.offset === 0 ? main.rows : (await pageOf({ offset: 0, limit: page.offset + page.limit })).rows;
      const merged = [...top, ...open]
        .sort((a, b) => (a.timestamp === b.timestamp ? (a.id < b.id ? 1 : -1) : a.timestamp < b.timestamp ? 1 : -1))
        .slice(page.offset, page.offset + page.limit);
      return { entries: merged.map(fromRow), total };
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
      // The alias differs from the column: an alias named `member_name` would shadow the
      // column inside argMax on servers that resolve aliases first.
      const rows = await selectRows<{ member_id: string; latest_name: string }>(
        `SELECT member_id, argMax(member_name, timestamp) AS latest_name FROM ${entriesWhere('agent_id IN {agentIds:Array(String)}')}
         GROUP BY member_id ORDER BY latest_name, member_id`,
        { agentIds: [...agentIds] },
      );
      return rows.map((row) => ({ memberId: row.member_id, memberName: row.latest_name }));
    },

    async stats(filter) {
      if (filter.agentIds.length === 0) return { calls: 0, allowed: 0, denied: 0 };
      const where = callsOf(whereOf({ agentIds: filter.agentIds, from: filter.from, to: filter.to }));
      const [row] = await selectRows<{ calls: number | string; allowed: number | string; denied: number | string }>(
        `SELECT count() AS calls, countIf(decision = 'ALLOW') AS allowed, countIf(decision = 'DENY') AS denied
         FROM ${entriesWhere(where.sql)}`,
        where.params,
      );
      return { calls: Number(row?.calls ?? 0), allowed: Number(row?.allowed ?? 0), denied: Number(row?.denied ?? 0) };
    },

    async shadowResults(agentId, policyDbId, since, sampleLimit) {
      // The day bound as well as the instant (the sort key starts with the day, see audit-filter.ts).
      const where = `agent_id = {agentId:String} AND timestamp >= {since:DateTime64(3, 'UTC')}
        AND toDate(timestamp) >= toDate32({since:DateTime64(3, 'UTC')}) AND shadow_decision != ''`;
      const mine = 'has(shadow_policy_db_ids, {policyDbId:String})';
      const params = { agentId, policyDbId, since: toClickHouseTime(since) };
      const [[counts], samples] = await Promise.all([
        selectRows<{ evaluated: number | string; matched: number | string; allow_to_deny: number | string; deny_to_allow: number | string; last: string }>(
          `SELECT count() AS evaluated, countIf(${mine}) AS matched,
             countIf(${mine} AND decision = 'ALLOW' AND shadow_decision IN ('DENY', 'APPROVAL_REQUIRED')) AS allow_to_deny,
             countIf(${mine} AND decision = 'DENY' AND shadow_decision = 'ALLOW') AS deny_to_allow,
             toString(maxIf(timestamp, ${mine})) AS last
           FROM ${TABLE} WHERE ${where}`,
          params,
        ),
        selectRows<{ id: string; ts: string; member_id: string; member_name: string; service: string; tool: string; decision: string; shadow_decision: string }>(
          `SELECT toString(id) AS id, toString(timestamp) AS ts, member_id, member_name, service, tool, decision, shadow_decision
           FROM ${TABLE} WHERE ${where} AND ${mine} AND shadow_decision != decision
           ORDER BY timestamp DESC, id DESC LIMIT {sampleLimit:UInt32}`,
          { ...params, sampleLimit },
        ),
      ]);
      const matched = Number(counts?.matched ?? 0);
      return {
        evaluated: Number(counts?.evaluated ?? 0),
        matched,
        allowToDeny: Number(counts?.allow_to_deny ?? 0),
        denyToAllow: Number(counts?.deny_to_allow ?? 0),
        samples: samples.map((row) => ({
          entryId: row.id, timestamp: fromClickHouseTime(row.ts), memberId: row.member_id, memberName: row.member_name,
          service: row.service, tool: row.tool, decision: row.decision, shadowDecision: row.shadow_decision,
        })),
        lastMatched: matched > 0 && counts ? fromClickHouseTime(counts.last) : '',
      };
    },

    async policyTriggers(agentId, policyDbIds) {
      if (policyDbIds.length === 0) return [];
      // `hasAny` lets the policy_db_ids bloom filter skip granules before ARRAY JOIN unfolds the matches.
      const rows = await selectRows<{ policy_db_id: string; n: number | string; last: string }>(
        `SELECT policy_db_id, count() AS n, toString(max(timestamp)) AS last
         FROM ${entriesWhere('agent_id = {agentId:String} AND hasAny(policy_db_ids, {policyDbIds:Array(String)})')}
         ARRAY JOIN policy_db_ids AS policy_db_id
         WHERE policy_db_id IN {policyDbIds:Array(String)}
         GROUP BY policy_db_id ORDER BY policy_db_id`,
        { agentId, policyDbIds: [...policyDbIds] },
      );
      return rows.map((row) => ({ policyDbId: row.policy_db_id, count: Number(row.n), lastTriggered: fromClickHouseTime(row.last) }));
    },

    async memberStats(filter) {
      if (filter.agentIds.length === 0) return [];
      const where = callsOf(whereOf({ agentIds: filter.agentIds, from: filter.from, to: filter.to }));
      // `latest_name`, not `member_name`: an alias named like the column would shadow it inside argMax (see `members`).
      const rows = await selectRows<{ member_id: string; latest_name: string; calls: number | string; allowed: number | string; denied: number | string; last: string }>(
        `SELECT member_id, argMax(member_name, timestamp) AS latest_name, count() AS calls,
                countIf(decision = 'ALLOW') AS allowed, countIf(decision = 'DENY') AS denied, toString(max(timestamp)) AS last
         FROM ${entriesWhere(where.sql)}
         GROUP BY member_id ORDER BY calls DESC, member_id`,
        where.params,
      );
      return rows.map((row) => ({
        memberId: row.member_id, memberName: row.latest_name,
        calls: Number(row.calls), allowed: Number(row.allowed), denied: Number(row.denied), lastCallAt: fromClickHouseTime(row.last),
      }));
    },

    async sessionActivity(agentId, sessionId) {
      // Tool calls only, as every call counter counts them (decision 071).
      const { sql, params } = callsOf({ sql: 'agent_id = {agent:String} AND session_id = {session:String}', params: { agent: agentId, session: sessionId } });
      const scope = `FROM ${entriesWhere(sql)}`;
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
           ${scope} ARRAY JOIN policy_db_ids AS policy_db_id
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

    async histogram(filter) {
      const resolved = await resolveFilter(filter);
      return histogramOf(resolved && whereOf(resolved), filter.from, filter.to, resolved !== undefined && await anyOpen());
    },

    async overview(filter) {
      const withOpen = filter.agentIds.length > 0 && await anyOpen();
      // Every figure counts tool calls, as the other counters do (decision 071).
      const where = filter.agentIds.length === 0 ? undefined : callsOf(whereOf({ agentIds: filter.agentIds, from: filter.from, to: filter.to }));
      const series = await histogramOf(where, filter.from, filter.to, withOpen);
      const calls = series.buckets.reduce((n, b) => n + b.calls, 0);
      const denies = series.buckets.reduce((n, b) => n + b.denies, 0);
      const none = { series, calls, denies, topDeniedTools: [], topDeniedPolicies: [], memberDenyRates: [], agentsWithErrors: [] };
      if (!where || calls === 0) return none;
      const params = { ...where.params, top: filter.top, upstreamMarker: UPSTREAM_ERROR_MARKER, policyAgentIds: [...filter.policyAgentIds] };
      const from = (columns: string, extra: string) => entriesOnce(columns, `${where.sql} AND ${extra}`, withOpen);
      type N = number | string;
      const [tools, policies, members, errors] = await Promise.all([
        denies === 0 ? [] : selectRows<{ service: string; tool: string; denies: N }>(
          `SELECT service, tool, count() AS denies FROM ${from('service, tool', "decision = 'DENY'")}
           GROUP BY service, tool ORDER BY denies DESC, service, tool LIMIT {top:UInt32}`, params),
        denies === 0 || filter.policyAgentIds.length === 0 ? [] : selectRows<{ policy_db_id: string; policy_agent: string; policy_key: string; policy_name: string; denies: N }>(
          // Keys and names sit at the same index as the database id in their arrays (see `sessionActivity`).
          `SELECT policy_db_id, any(agent_id) AS policy_agent,
                  argMax(matched_policy_ids[indexOf(policy_db_ids, policy_db_id)], timestamp) AS policy_key,
                  argMax(matched_policy_names[indexOf(policy_db_ids, policy_db_id)], timestamp) AS policy_name, count() AS denies
           FROM ${from('agent_id, timestamp, policy_db_ids, matched_policy_ids, matched_policy_names', "decision = 'DENY' AND agent_id IN {policyAgentIds:Array(String)}")}
           ARRAY JOIN policy_db_ids AS policy_db_id
           GROUP BY policy_db_id ORDER BY denies DESC, policy_db_id LIMIT {top:UInt32}`, params),
        // `latest_name`, not `member_name`: an alias named like the column would shadow it inside argMax (see `members`).
        selectRows<{ member_id: string; latest_name: string; member_agent: string; calls: N; denies: N }>(
          `SELECT member_id, argMax(member_name, timestamp) AS latest_name, any(agent_id) AS member_agent, count() AS calls, countIf(decision = 'DENY') AS denies
           FROM ${from('member_id, member_name, agent_id, timestamp, decision', '1')}
           GROUP BY member_id ORDER BY denies DESC, calls DESC, member_id LIMIT {top:UInt32}`, params),
        selectRows<{ agent_id: string; latest_agent_name: string; errors: N; last: string }>(
          `SELECT agent_id, argMax(agent_name, timestamp) AS latest_agent_name, count() AS errors, toString(max(timestamp)) AS last
           FROM ${from('agent_id, agent_name, timestamp', 'position(reason, {upstreamMarker:String}) > 0')}
           GROUP BY agent_id ORDER BY errors DESC, agent_id LIMIT {top:UInt32}`, params),
      ]);
      return {
        ...none,
        topDeniedTools: tools.map((t) => ({ service: t.service, tool: t.tool, denies: Number(t.denies) })),
        topDeniedPolicies: policies.map((p) => ({ policyDbId: p.policy_db_id, policyKey: p.policy_key, policyName: p.policy_name, agentId: p.policy_agent, denies: Number(p.denies) })),
        memberDenyRates: members.map((m) => ({ memberId: m.member_id, memberName: m.latest_name, agentId: m.member_agent, calls: Number(m.calls), denies: Number(m.denies) })),
        agentsWithErrors: errors.map((e) => ({ agentId: e.agent_id, agentName: e.latest_agent_name, errors: Number(e.errors), lastErrorAt: fromClickHouseTime(e.last) })),
      };
    },

    migrate: () => applyMigrations(client, database),

    async setRetention(days) {
      for (const table of ['audit_entries', 'audit_open']) {
        if (days !== null) {
          await command('ALTER TABLE {database:Identifier}.{table:Identifier} MODIFY TTL toDateTime(timestamp) + toIntervalDay({days:UInt32})', { table, days });
          continue;
        }
        const [found] = await selectRows<{ ttl: number | string }>(
          'SELECT position(engine_full, \' TTL \') > 0 AS ttl FROM system.tables WHERE database = {database:String} AND name = {table:String}', { table });
        if (Number(found?.ttl)) await command('ALTER TABLE {database:Identifier}.{table:Identifier} REMOVE TTL', { table });
      }
    },

    close: () => connection.close(),
  };
}
