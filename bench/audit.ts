/**
 * bench/audit: the audit store's write and read paths, each next to a direct engine
 * baseline measured in the same run. `npm run bench:audit` (needs NATS JetStream at
 * TEST_NATS_URL, default 127.0.0.1:4222, as the writer tests do, and for `http-export` the
 * Postgres the e2e tests use). Embedded chDB in temp dirs. The figures issue 17 asks for.
 *
 * 1. ingest: BENCH_INGEST entries are published to JetStream first, then one real writer
 *    (`startAuditWriter`, the configured batch size and wait) drains them into the store:
 *    entries/s per writer. Baseline: the same number of entries inserted directly
 *    (`store.insert`, same batch size), no bus.
 *    Lag: with the writer running, entries published at BENCH_LAG_RATE/s for
 *    BENCH_LAG_SECONDS; lag = from the publish call to the end of the INSERT that made the
 *    entry queryable (a ClickHouse INSERT is visible once it returns). p50/p99. Baselines:
 *    a JetStream publish round trip, and a one-row INSERT.
 * 2. query: BENCH_ROWS entries seeded in the engine (200 agents, 2,000 members, ~90 days),
 *    then the Query handler (`handleQuery`: validation, page of 500 newest first + total) over
 *    all 200 agents, for every filter kind of the spec — one-day from/to, agent name
 *    substring, service, tool substring, result, member id, policy id — and two combined
 *    (agent substring + DENY; member id + a 7-day range): p50 and p99 of BENCH_QUERY_RUNS
 *    after 3 warm-up runs. Baseline: a raw `SELECT count() … WHERE <same filter>` (no FINAL:
 *    the table holds each entry once) on a native chDB Session, p50 and p99.
 * 3. export: a full CSV Export of those rows over real gRPC (loopback), rows/s and process RSS
 *    (sampled every 20 ms; the gRPC client is in the same process). Baseline: the engine's own
 *    CSV of the same columns, same in-order read, streamed to nowhere.
 * 4. http-export: the same CSV as an analyst pulls it, `GET /api/audit/export?exportAll=true`,
 *    through a gateway process and an audit service process (split mode, see
 *    `audit-http-export.ts`), BENCH_ROWS rows of agents the signed-in owner sees. Read as fast
 *    as the client can: rows/s and peak RSS growth of the gateway, the audit service and this
 *    process (VmRSS every 50 ms). Then a slow client (~2 MB/s for 5 s, then it hangs up): the
 *    gateway's RSS growth meanwhile, which backpressure must keep flat (goal label: ≤ 50 MB,
 *    where buffering the unread export would add hundreds). Baseline: the engine's CSV of the
 *    same rows in the audit service's directory.
 *
 * Figures depend on the machine's load; CPU time (user+system of the whole process, engine
 * threads included) is printed beside wall time. Not a test: nothing asserts on time.
 * Knobs: BENCH_ROWS (10,000,000; seeded for query/export and again for http-export),
 * BENCH_INGEST (100,000), BENCH_LAG_RATE (1,000/s), BENCH_LAG_SECONDS (10),
 * BENCH_QUERY_RUNS (30), BENCH_PHASES (ingest,query,export,http-export).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { drainPending, Session } from 'chdb';
import { AuditQueryService, bindServer, createNatsBus, type AuditEntry, type AuditFilterMsg, type ExportChunk, type QueryRequest } from '@portcullis/core';
import { TEST_NATS_URL, uniqueSubjectPrefix } from '@portcullis/core/testing';
import { loadAuditConfig } from '../services/audit/src/config.ts';
import { startAuditWriter, type AuditWriterOptions } from '../services/audit/src/consumer.ts';
import { handleQuery } from '../services/audit/src/handlers/query.ts';
import { createAuditGrpcServer } from '../services/audit/src/server.ts';
import { whereOf, type BoundWhere } from '../services/audit/src/store/audit-filter.ts';
import { openAuditStore, type AuditStore } from '../services/audit/src/store/audit-store.ts';
import { parseFilter } from '../services/audit/src/handlers/parse-request.ts';
import { makeEntry } from '../services/audit/src/testing/audit-entries.ts';
import { deleteAuditStream } from '../services/audit/src/testing/nats-streams.ts';
import { seedMemberId, seedPolicyDbId, seedRollupStatements, seedStatement } from '../services/audit/src/testing/seed-audit-rows.ts';
import { benchHttpExport } from './audit-http-export.ts';
import { engineCsvExport } from './engine-csv-baseline.ts';
import { sampleRss, type RssGrowth } from './rss-sampler.ts';
import { untilMergesSettle } from './store-settle.ts';

const ROWS = Number(process.env.BENCH_ROWS ?? 10_000_000);
const INGEST = Number(process.env.BENCH_INGEST ?? 100_000);
const LAG_RATE = Number(process.env.BENCH_LAG_RATE ?? 1_000);
const LAG_SECONDS = Number(process.env.BENCH_LAG_SECONDS ?? 10);
const QUERY_RUNS = Number(process.env.BENCH_QUERY_RUNS ?? 30);
const QUERY_WARM_UP_RUNS = 3;
/** Which parts to run: any of ingest, query, export, http-export (query and export share the seeded rows). */
const PHASES = new Set((process.env.BENCH_PHASES ?? 'ingest,query,export,http-export').split(','));
const PUBLISH_IN_FLIGHT = 512;
const SEED_CHUNK = 1_000_000;
const AGENTS = 200;
const DATABASE = 'portcullis';
/** The seeded 90 days end now, as a live store's do (the newest page is then in the newest day). */
const START_MS = Date.now() - 90 * 86_400_000;
/** Ingested and lag entries are live calls: stamped from a minute ago on. */
const LIVE_MS = Date.now() - 60_000;
/** ~90 days of data whatever BENCH_ROWS is. */
const STEP_MS = Math.max(1, Math.floor((90 * 86_400_000) / ROWS));
const GOALS = {
  ingestPerWriter: 50_000, lagP99Ms: 1_000, queryP50Ms: 50, queryP99Ms: 150,
  exportRowsPerS: 1_000_000, exportRssGrowthMb: 300, slowClientRssGrowthMb: 50,
};

// The writer's batching knobs as an operator would set them (defaults otherwise).
const config = loadAuditConfig({ NODE_ENV: 'production', AUDIT_BATCH_SIZE: process.env.AUDIT_BATCH_SIZE, AUDIT_BATCH_MAX_WAIT_MS: process.env.AUDIT_BATCH_MAX_WAIT_MS });
const prefix = uniqueSubjectPrefix('bench_audit');

const fmt = (n: number, digits = 0) => n.toLocaleString('en', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const mb = (bytes: number) => fmt(bytes / 1e6);
const percentile = (samples: number[], p: number) => {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
};
const cpuSeconds = (since: NodeJS.CpuUsage) => {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1e6;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const verdict = (met: boolean) => (met ? 'met' : 'missed');
const rows: string[][] = [];
const row = (...cells: string[]) => rows.push(cells);

async function publishAll(publish: (entry: AuditEntry) => Promise<void>, entries: AuditEntry[]): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(PUBLISH_IN_FLIGHT, entries.length) }, async () => {
    while (next < entries.length) await publish(entries[next++]!);
  }));
}

async function main(): Promise<void> {
  console.log(`bench/audit: phases ${[...PHASES].join(',')}; ${fmt(ROWS)} seeded rows, ${fmt(INGEST)} ingested entries, lag at ${LAG_RATE}/s for ${LAG_SECONDS} s, ${QUERY_RUNS} query runs; batch ${config.AUDIT_BATCH_SIZE}, wait ${config.AUDIT_BATCH_MAX_WAIT_MS} ms; NATS ${TEST_NATS_URL}`);
  if (PHASES.has('ingest') || PHASES.has('query') || PHASES.has('export')) await embeddedPhases();
  // chDB binds one data directory per process: the embedded store above is closed (and
  // drained) before http-export opens the audit service's directory to seed it.
  if (PHASES.has('http-export')) await benchGatewayExport();
  console.log('\n| measure | product | direct baseline | ratio | goal |\n|---|---:|---:|---:|---|');
  for (const cells of rows) console.log(`| ${cells.join(' | ')} |`);
}

/** ingest, query and export: one embedded store in a temp dir, and a native Session on it. */
async function embeddedPhases(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'portcullis-bench-audit-'));
  const storePath = join(dataDir, 'audit');
  try {
    const store = await openAuditStore({ target: { kind: 'chdb', path: storePath }, database: DATABASE });
    const session = new Session(storePath);
    try {
      if (PHASES.has('ingest')) await benchIngestAndLag(store);
      if (PHASES.has('query') || PHASES.has('export')) await seed(session);
      if (PHASES.has('query')) await benchQueries(store, session);
      if (PHASES.has('export')) await benchExport(store, session);
    } finally {
      session.close();
      await store.close();
    }
  } finally {
    await drainPending();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function benchIngestAndLag(store: AuditStore): Promise<void> {
  const bus = await createNatsBus({ url: TEST_NATS_URL, subjectPrefix: prefix });
  try {
    await ingestAndLag(store, bus);
  } finally {
    await bus.close();
    await deleteAuditStream(TEST_NATS_URL, prefix).catch(() => undefined);
  }
}

async function ingestAndLag(store: AuditStore, bus: Awaited<ReturnType<typeof createNatsBus>>): Promise<void> {
  // Baseline first: direct INSERTs of the configured batch size, no bus.
  const direct = Array.from({ length: INGEST }, (_, i) => makeEntry({ agentId: `direct-agent-${i % 20}`, timestamp: new Date(LIVE_MS + i).toISOString() }));
  let started = performance.now();
  const directCpu = process.cpuUsage();
  for (let i = 0; i < direct.length; i += config.AUDIT_BATCH_SIZE) await store.insert(direct.slice(i, i + config.AUDIT_BATCH_SIZE));
  const directRate = INGEST / ((performance.now() - started) / 1000);
  const directPerCpuSecond = INGEST / cpuSeconds(directCpu);

  // Publish everything first, so the writer's own rate is what gets measured.
  const entries = Array.from({ length: INGEST }, (_, i) => makeEntry({ agentId: `ingest-agent-${i % 20}`, timestamp: new Date(LIVE_MS + i).toISOString() }));
  started = performance.now();
  await publishAll((e) => bus.publishAudit(e), entries);
  const publishRate = INGEST / ((performance.now() - started) / 1000);

  let inserted = 0;
  const insertedAt = new Map<string, number>();
  // The writer's store, noting when each entry became queryable; whatever else the writer
  // uses of the store (and any further insert argument) goes straight through.
  const counting: AuditWriterOptions['store'] = {
    ...store,
    async insert(...args: Parameters<AuditStore['insert']>) {
      await store.insert(...args);
      const now = performance.now();
      for (const entry of args[0]) insertedAt.set(entry.id, now);
      inserted += args[0].length;
    },
  };
  started = performance.now();
  const cpu = process.cpuUsage();
  const writer = await startAuditWriter({ bus, store: counting, batchSize: config.AUDIT_BATCH_SIZE, maxWaitMs: config.AUDIT_BATCH_MAX_WAIT_MS, log: (m, e) => console.error(m, e ?? '') });
  try {
    while (inserted < INGEST) await sleep(5);
    const seconds = (performance.now() - started) / 1000;
    const writerRate = INGEST / seconds;
    console.log(`ingest: writer ${fmt(writerRate)} entries/s (${fmt(INGEST / cpuSeconds(cpu))} per CPU-second), direct INSERT ${fmt(directRate)}/s (${fmt(directPerCpuSecond)} per CPU-second), JetStream publish ${fmt(publishRate)}/s (${PUBLISH_IN_FLIGHT} in flight)`);
    row('ingest, entries/s per writer', fmt(writerRate), `${fmt(directRate)} (direct INSERT)`, fmt(writerRate / directRate, 2), `≥ ${fmt(GOALS.ingestPerWriter)}: ${verdict(writerRate >= GOALS.ingestPerWriter)}`);

    // Lag at a steady rate.
    const publishedAt = new Map<string, number>();
    const lagEntries = Array.from({ length: LAG_RATE * LAG_SECONDS }, (_, i) => makeEntry({ agentId: `lag-agent-${i % 20}`, timestamp: new Date(LIVE_MS + i).toISOString() }));
    const pubLatencies: number[] = [];
    const interval = 1000 / LAG_RATE;
    const t0 = performance.now();
    const inFlight: Promise<void>[] = [];
    for (let i = 0; i < lagEntries.length; i += 1) {
      const due = t0 + i * interval;
      const wait = due - performance.now();
      if (wait > 1) await sleep(wait);
      const entry = lagEntries[i]!;
      const at = performance.now();
      publishedAt.set(entry.id, at);
      inFlight.push(bus.publishAudit(entry).then(() => { pubLatencies.push(performance.now() - at); }));
    }
    await Promise.all(inFlight);
    const deadline = performance.now() + 30_000;
    while (lagEntries.some((e) => !insertedAt.has(e.id)) && performance.now() < deadline) await sleep(20);
    const lags = lagEntries.map((e) => (insertedAt.get(e.id) ?? NaN) - publishedAt.get(e.id)!).filter(Number.isFinite);
    const oneRow: number[] = [];
    for (let i = 0; i < 50; i += 1) {
      const at = performance.now();
      await store.insert([makeEntry({ agentId: 'single-agent', timestamp: new Date(LIVE_MS + i).toISOString() })]);
      oneRow.push(performance.now() - at);
    }
    const p50 = percentile(lags, 50), p99 = percentile(lags, 99);
    console.log(`lag: p50 ${fmt(p50, 1)} ms, p99 ${fmt(p99, 1)} ms over ${lags.length}/${lagEntries.length} entries; publish round trip p50 ${fmt(percentile(pubLatencies, 50), 2)} ms; one-row INSERT p50 ${fmt(percentile(oneRow, 50), 2)} ms`);
    row('call → queryable lag p50, ms', fmt(p50, 1), `${fmt(percentile(pubLatencies, 50), 2)} publish + ${fmt(percentile(oneRow, 50), 2)} INSERT`, '', `batching wait ${config.AUDIT_BATCH_MAX_WAIT_MS} ms`);
    row('call → queryable lag p99, ms', fmt(p99, 1), `${fmt(percentile(pubLatencies, 99), 2)} publish + ${fmt(percentile(oneRow, 99), 2)} INSERT`, '', `≤ ${fmt(GOALS.lagP99Ms)}: ${verdict(p99 <= GOALS.lagP99Ms)}`);
  } finally {
    await writer.stop();
  }
}

async function seed(session: Session): Promise<void> {
  const started = performance.now();
  for (let first = 0; first < ROWS; first += SEED_CHUNK) {
    const { sql, params } = seedStatement({ database: DATABASE, count: Math.min(SEED_CHUNK, ROWS - first), first, agents: AGENTS, startMs: START_MS, stepMs: STEP_MS });
    await session.queryBindAsync(sql, params, { format: 'TSV' });
  }
  for (const { sql, params } of seedRollupStatements(DATABASE)) await session.queryBindAsync(sql, params, { format: 'TSV' });
  console.log(`seeded ${fmt(ROWS)} rows in ${fmt((performance.now() - started) / 1000, 1)} s; background merges settled after ${fmt(await untilMergesSettle(session), 1)} s more`);
}

const seededAgents = Array.from({ length: AGENTS }, (_, k) => `agent-${k}`);
const emptyFilter: AuditFilterMsg = { agentIds: seededAgents, from: '', to: '', agent: '', service: '', tool: '', result: '', member: '', policy: '' };
/** `START_MS` + `days`, as the `YYYY-MM-DD` a `from`/`to` filter takes (a bare date covers the whole day). */
const dayOf = (days: number) => new Date(START_MS + days * 86_400_000).toISOString().slice(0, 10);

/**
 * The store's WHERE for a wire filter, built as the store builds it — the agent and tool
 * substrings resolved against its rollups into agent ids and tool names (`resolveFilter`) —
 * so the raw count() baseline runs the same conditions. Resolved once, outside the timing.
 */
async function boundWhereOf(store: AuditStore, filter: AuditFilterMsg): Promise<BoundWhere> {
  const resolved = await store.resolveFilter(parseFilter(filter));
  if (!resolved) throw new Error(`the filter ${JSON.stringify({ ...filter, agentIds: '…' })} can match none of the seeded rows`);
  return whereOf(resolved);
}

/** Every filter kind of the spec, and two combined, over the seeded rows (the ~90 days' middle for dates). */
const QUERY_KINDS: Array<[label: string, filter: Partial<AuditFilterMsg>]> = [
  ['time range (one day)', { from: dayOf(45), to: dayOf(45) }],
  ['agent (name substring)', { agent: 'agent 17' }],
  ['service', { service: 'github' }],
  ['tool (substring)', { tool: 'tool_3' }],
  ['result', { result: 'DENY' }],
  ['member (id)', { member: seedMemberId(42) }],
  ['policy (db id)', { policy: seedPolicyDbId(42, 2) }],
  ['agent substring + result DENY', { agent: 'agent 17', result: 'DENY' }],
  ['member id + 7-day range', { member: seedMemberId(42), from: dayOf(42), to: dayOf(48) }],
];

async function benchQueries(store: AuditStore, session: Session): Promise<void> {
  for (const [label, over] of QUERY_KINDS) {
    const filter: AuditFilterMsg = { ...emptyFilter, ...over };
    const request: QueryRequest = { filter, limit: 0, offset: 0 };
    const where = await boundWhereOf(store, filter);
    const countSql = `SELECT count() FROM {database:Identifier}.audit_entries WHERE ${where.sql}`;
    const timeHandler: number[] = [], timeCount: number[] = [];
    let total = 0;
    for (let run = -QUERY_WARM_UP_RUNS; run < QUERY_RUNS; run += 1) {
      let at = performance.now();
      const response = await handleQuery({ store }, request);
      if (run >= 0) timeHandler.push(performance.now() - at);
      total = response.total;
      at = performance.now();
      await session.queryBindAsync(countSql, { database: DATABASE, ...where.params }, { format: 'TSV' });
      if (run >= 0) timeCount.push(performance.now() - at);
    }
    const p50 = percentile(timeHandler, 50), p99 = percentile(timeHandler, 99);
    const base50 = percentile(timeCount, 50), base99 = percentile(timeCount, 99);
    console.log(`query ${label}: handler p50 ${fmt(p50, 1)} ms, raw count() p50 ${fmt(base50, 1)} ms; handler p99 ${fmt(p99, 1)} ms, raw count() p99 ${fmt(base99, 1)} ms; ${fmt(total)} matches`);
    row(`Query p50, ${label} (${fmt(total)} matches), ms`, fmt(p50, 1), `${fmt(base50, 1)} (raw count())`, fmt(p50 / base50, 1), `≤ ${GOALS.queryP50Ms}: ${verdict(p50 <= GOALS.queryP50Ms)}`);
    row(`Query p99, ${label}, ms`, fmt(p99, 1), `${fmt(base99, 1)} (raw count())`, fmt(p99 / base99, 1), `≤ ${GOALS.queryP99Ms}: ${verdict(p99 <= GOALS.queryP99Ms)}`);
  }
}

async function benchExport(store: AuditStore, session: Session): Promise<void> {
  const server = createAuditGrpcServer({ store, log: (m, e) => console.error(m, e ?? '') });
  const address = await bindServer(server, '127.0.0.1:0');
  const client = new AuditQueryService(address, grpc.credentials.createInsecure()) as grpc.Client & Record<string, (...args: any[]) => any>;
  try {
    const baseline = await engineCsvExport(session, DATABASE, seededAgents);

    global.gc?.();
    const sampler = sampleRss({ bench: process.pid }, 20);
    const cpu = process.cpuUsage();
    const started = performance.now();
    const { records, bytes, chunks } = await new Promise<{ records: number; bytes: number; chunks: number }>((resolve, reject) => {
      let lines = 0, size = 0, count = 0;
      const call = client.Export!({ filter: emptyFilter, limit: 0, offset: 0, format: 'csv', redactPolicyAgentIds: [] });
      call.on('data', (chunk: ExportChunk) => {
        const data = chunk.data;
        count += 1;
        size += data.length;
        for (let i = data.indexOf(10); i !== -1; i = data.indexOf(10, i + 1)) lines += 1;
      });
      call.on('error', reject);
      call.on('end', () => resolve({ records: lines, bytes: size, chunks: count }));
    });
    const seconds = (performance.now() - started) / 1000;
    const cpuUsed = cpuSeconds(cpu);
    const { bench: rss } = sampler.stop();
    const exported = records - 1;
    const rate = exported / seconds;
    console.log(`export: ${fmt(exported)} rows (expected ${fmt(ROWS)}) in ${fmt(seconds, 2)} s = ${fmt(rate)} rows/s (${fmt(exported / cpuUsed)} per CPU-second), ${mb(bytes)} MB in ${fmt(chunks)} chunks; RSS ${mb(rss.before)} → peak ${mb(rss.peak)} MB (+${mb(rss.growth)} MB); engine CSV ${fmt(baseline.rowsPerSecond)} rows/s`);
    row(`CSV export over gRPC, rows/s (${fmt(exported)} rows)`, fmt(rate), `${fmt(baseline.rowsPerSecond)} (engine CSV, no gRPC)`, fmt(rate / baseline.rowsPerSecond, 2), `≥ ${fmt(GOALS.exportRowsPerS)}: ${verdict(rate >= GOALS.exportRowsPerS)}`);
    row('CSV export over gRPC, peak RSS growth (service + client), MB', mb(rss.growth), `RSS before ${mb(rss.before)} MB`, '', `≤ ${GOALS.exportRssGrowthMb}: ${verdict(rss.growth / 1e6 <= GOALS.exportRssGrowthMb)}`);
  } finally {
    client.close();
    server.forceShutdown();
  }
}

async function benchGatewayExport(): Promise<void> {
  const f = await benchHttpExport({ database: DATABASE, rows: ROWS, agents: AGENTS, startMs: START_MS, stepMs: STEP_MS, chunk: SEED_CHUNK });
  const growth = (label: string, g: RssGrowth) => `${label} ${mb(g.before)} → ${mb(g.peak)} MB (+${mb(g.growth)})`;
  console.log(`http export (gateway): seeded ${fmt(ROWS)} rows for the analyst's ${AGENTS} agents in ${fmt(f.seedSeconds, 1)} s, ${fmt(f.visibleRows)} visible through GET /api/audit`);
  console.log(`http export (gateway): ${fmt(f.rows)} rows (expected ${fmt(ROWS)}) in ${fmt(f.seconds, 2)} s = ${fmt(f.rowsPerSecond)} rows/s, ${mb(f.bytes)} MB; RSS ${growth('gateway', f.rss.gateway)}, ${growth('audit', f.rss.audit)}, ${growth('client', f.rss.bench)}; engine CSV ${fmt(f.engineCsvRowsPerSecond)} rows/s`);
  console.log(`http export (gateway), slow client: read ${mb(f.slow.bytes)} MB in ${fmt(f.slow.seconds, 1)} s, then hung up; RSS ${growth('gateway', f.slow.rss.gateway)}, ${growth('audit', f.slow.rss.audit)}`);
  const rssGoal = (bytes: number) => `≤ ${GOALS.exportRssGrowthMb}: ${verdict(bytes / 1e6 <= GOALS.exportRssGrowthMb)}`;
  row(`CSV export via gateway (GET /api/audit/export?exportAll=true), rows/s (${fmt(f.rows)} rows)`, fmt(f.rowsPerSecond), `${fmt(f.engineCsvRowsPerSecond)} (engine CSV, no gRPC, no HTTP)`, fmt(f.rowsPerSecond / f.engineCsvRowsPerSecond, 2), `≥ ${fmt(GOALS.exportRowsPerS)}: ${verdict(f.rowsPerSecond >= GOALS.exportRowsPerS)}`);
  row('CSV export via gateway, gateway peak RSS growth, MB', mb(f.rss.gateway.growth), `RSS before ${mb(f.rss.gateway.before)} MB`, '', rssGoal(f.rss.gateway.growth));
  row('CSV export via gateway, audit service peak RSS growth, MB', mb(f.rss.audit.growth), `RSS before ${mb(f.rss.audit.before)} MB`, '', rssGoal(f.rss.audit.growth));
  row('CSV export via gateway, HTTP client (bench) peak RSS growth, MB', mb(f.rss.bench.growth), `RSS before ${mb(f.rss.bench.before)} MB`, '', rssGoal(f.rss.bench.growth));
  row(`slow client (~2 MB/s, ${fmt(f.slow.seconds, 0)} s, ${mb(f.slow.bytes)} MB read), gateway RSS growth, MB`, mb(f.slow.rss.gateway.growth), `RSS before ${mb(f.slow.rss.gateway.before)} MB`, '', `flat, ≤ ${GOALS.slowClientRssGrowthMb}: ${verdict(f.slow.rss.gateway.growth / 1e6 <= GOALS.slowClientRssGrowthMb)}`);
}

await main();
