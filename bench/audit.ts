/**
 * bench/audit: the audit store's write and read paths, each next to a direct engine
 * baseline measured in the same run. `npm run bench:audit` (needs NATS JetStream at
 * TEST_NATS_URL, default 127.0.0.1:4222, as the writer tests do). Embedded chDB in a temp dir.
 *
 * 1. Ingest: BENCH_INGEST entries are published to JetStream first, then one real writer
 *    (`startAuditWriter`, the configured batch size and wait) drains them into the store:
 *    entries/s per writer. Baseline: the same number of entries inserted directly
 *    (`store.insert`, same batch size), no bus.
 * 2. Lag: with the writer running, entries published at BENCH_LAG_RATE/s for
 *    BENCH_LAG_SECONDS; lag = from the publish call to the end of the INSERT that made the
 *    entry queryable (a ClickHouse INSERT is visible once it returns). p50/p99. Baselines:
 *    a JetStream publish round trip, and a one-row INSERT.
 * 3. Query: BENCH_ROWS entries seeded in the engine (200 agents, 2,000 members, ~90 days),
 *    then the Query handler (`handleQuery`: validation, page of 500 newest first + count, both
 *    with FINAL) per filter kind over all 200 agents: p50 of BENCH_QUERY_RUNS. Baseline: a raw
 *    `SELECT count() … FINAL WHERE <same filter>` on a native chDB Session.
 * 4. Export: a full CSV Export of those rows over real gRPC (loopback), rows/s and process RSS
 *    (sampled every 20 ms; the gRPC client is in the same process). Baseline: the engine's own
 *    CSV of the same columns, same FINAL in-order read, streamed to nowhere.
 *
 * Figures depend on the machine's load; CPU time (user+system of the whole process, engine
 * threads included) is printed beside wall time. Not a test: nothing asserts on time.
 * Knobs: BENCH_ROWS (10,000,000), BENCH_INGEST (100,000), BENCH_LAG_RATE (1,000/s),
 * BENCH_LAG_SECONDS (10), BENCH_QUERY_RUNS (10), BENCH_PHASES (ingest,query,export).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { Session } from 'chdb';
import { AuditQueryService, bindServer, createNatsBus, type AuditEntry, type ExportChunk, type QueryRequest } from '@portcullis/core';
import { TEST_NATS_URL, uniqueSubjectPrefix } from '@portcullis/core/testing';
import { loadAuditConfig } from '../services/audit/src/config.ts';
import { startAuditWriter } from '../services/audit/src/consumer.ts';
import { handleQuery } from '../services/audit/src/handlers/query.ts';
import { createAuditGrpcServer } from '../services/audit/src/server.ts';
import { whereOf } from '../services/audit/src/store/audit-filter.ts';
import { openAuditStore, type AuditStore } from '../services/audit/src/store/audit-store.ts';
import { parseFilter } from '../services/audit/src/handlers/parse-request.ts';
import { makeEntry } from '../services/audit/src/testing/audit-entries.ts';
import { deleteAuditStream } from '../services/audit/src/testing/nats-streams.ts';
import { seedMemberId, seedStatement } from '../services/audit/src/testing/seed-audit-rows.ts';

const ROWS = Number(process.env.BENCH_ROWS ?? 10_000_000);
const INGEST = Number(process.env.BENCH_INGEST ?? 100_000);
const LAG_RATE = Number(process.env.BENCH_LAG_RATE ?? 1_000);
const LAG_SECONDS = Number(process.env.BENCH_LAG_SECONDS ?? 10);
const QUERY_RUNS = Number(process.env.BENCH_QUERY_RUNS ?? 10);
/** Which parts to run: any of ingest, query, export (query and export share the seeded rows). */
const PHASES = new Set((process.env.BENCH_PHASES ?? 'ingest,query,export').split(','));
const PUBLISH_IN_FLIGHT = 512;
const SEED_CHUNK = 1_000_000;
const AGENTS = 200;
const DATABASE = 'portcullis';
const START_MS = Date.UTC(2026, 7, 3);
/** ~90 days of data whatever BENCH_ROWS is. */
const STEP_MS = Math.max(1, Math.floor((90 * 86_400_000) / ROWS));
const GOALS = { ingestPerWriter: 50_000, lagP99Ms: 2_000, queryP50Ms: 100, exportRowsPerS: 1_000_000 };

const config = loadAuditConfig({ NODE_ENV: 'production' });
const dataDir = mkdtempSync(join(tmpdir(), 'portcullis-bench-audit-'));
const storePath = join(dataDir, 'audit');
const prefix = uniqueSubjectPrefix('bench_audit');

const fmt = (n: number, digits = 0) => n.toLocaleString('en', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const percentile = (samples: number[], p: number) => {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
};
const cpuSeconds = (since: NodeJS.CpuUsage) => {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1e6;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const rows: string[][] = [];
const row = (...cells: string[]) => rows.push(cells);

async function publishAll(publish: (entry: AuditEntry) => Promise<void>, entries: AuditEntry[]): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(PUBLISH_IN_FLIGHT, entries.length) }, async () => {
    while (next < entries.length) await publish(entries[next++]!);
  }));
}

async function main(): Promise<void> {
  console.log(`bench/audit: ${fmt(ROWS)} seeded rows, ${fmt(INGEST)} ingested entries, lag at ${LAG_RATE}/s for ${LAG_SECONDS} s; batch ${config.AUDIT_BATCH_SIZE}, wait ${config.AUDIT_BATCH_MAX_WAIT_MS} ms; NATS ${TEST_NATS_URL}`);
  const store = await openAuditStore({ target: { kind: 'chdb', path: storePath }, database: DATABASE });
  const session = new Session(storePath);
  const bus = await createNatsBus({ url: TEST_NATS_URL, subjectPrefix: prefix });
  try {
    if (PHASES.has('ingest')) await benchIngestAndLag(store, bus);
    if (PHASES.has('query') || PHASES.has('export')) await seed(session);
    if (PHASES.has('query')) await benchQueries(store, session);
    if (PHASES.has('export')) await benchExport(store, session);
  } finally {
    await bus.close();
    await deleteAuditStream(TEST_NATS_URL, prefix).catch(() => undefined);
    session.close();
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
  console.log('\n| measure | product | direct baseline | ratio | goal |\n|---|---:|---:|---:|---|');
  for (const cells of rows) console.log(`| ${cells.join(' | ')} |`);
}

async function benchIngestAndLag(store: AuditStore, bus: Awaited<ReturnType<typeof createNatsBus>>): Promise<void> {
  // Baseline first: direct INSERTs of the configured batch size, no bus.
  const direct = Array.from({ length: INGEST }, (_, i) => makeEntry({ agentId: `direct-agent-${i % 20}`, timestamp: new Date(START_MS + i).toISOString() }));
  let started = performance.now();
  for (let i = 0; i < direct.length; i += config.AUDIT_BATCH_SIZE) await store.insert(direct.slice(i, i + config.AUDIT_BATCH_SIZE));
  const directRate = INGEST / ((performance.now() - started) / 1000);

  // Publish everything first, so the writer's own rate is what gets measured.
  const entries = Array.from({ length: INGEST }, (_, i) => makeEntry({ agentId: `ingest-agent-${i % 20}`, timestamp: new Date(START_MS + i).toISOString() }));
  started = performance.now();
  await publishAll((e) => bus.publishAudit(e), entries);
  const publishRate = INGEST / ((performance.now() - started) / 1000);

  let inserted = 0;
  const insertedAt = new Map<string, number>();
  const counting = {
    async insert(batch: readonly AuditEntry[]) {
      await store.insert(batch);
      const now = performance.now();
      for (const entry of batch) insertedAt.set(entry.id, now);
      inserted += batch.length;
    },
  };
  started = performance.now();
  const cpu = process.cpuUsage();
  const writer = await startAuditWriter({ bus, store: counting, batchSize: config.AUDIT_BATCH_SIZE, maxWaitMs: config.AUDIT_BATCH_MAX_WAIT_MS, log: (m, e) => console.error(m, e ?? '') });
  try {
    while (inserted < INGEST) await sleep(5);
    const seconds = (performance.now() - started) / 1000;
    const writerRate = INGEST / seconds;
    console.log(`ingest: writer ${fmt(writerRate)} entries/s (${fmt(INGEST / cpuSeconds(cpu))} per CPU-second), direct INSERT ${fmt(directRate)}/s, JetStream publish ${fmt(publishRate)}/s (${PUBLISH_IN_FLIGHT} in flight)`);
    row('ingest, entries/s per writer', fmt(writerRate), `${fmt(directRate)} (direct INSERT)`, fmt(writerRate / directRate, 2), `≥ ${fmt(GOALS.ingestPerWriter)}: ${writerRate >= GOALS.ingestPerWriter ? 'met' : 'missed'}`);

    // Lag at a steady rate.
    const publishedAt = new Map<string, number>();
    const lagEntries = Array.from({ length: LAG_RATE * LAG_SECONDS }, (_, i) => makeEntry({ agentId: `lag-agent-${i % 20}`, timestamp: new Date(START_MS + i).toISOString() }));
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
      await store.insert([makeEntry({ agentId: 'single-agent', timestamp: new Date(START_MS + i).toISOString() })]);
      oneRow.push(performance.now() - at);
    }
    const p50 = percentile(lags, 50), p99 = percentile(lags, 99);
    console.log(`lag: p50 ${fmt(p50, 1)} ms, p99 ${fmt(p99, 1)} ms over ${lags.length}/${lagEntries.length} entries; publish round trip p50 ${fmt(percentile(pubLatencies, 50), 2)} ms; one-row INSERT p50 ${fmt(percentile(oneRow, 50), 2)} ms`);
    row('call → queryable lag p50, ms', fmt(p50, 1), `${fmt(percentile(pubLatencies, 50), 2)} publish + ${fmt(percentile(oneRow, 50), 2)} INSERT`, '', `batching wait ${config.AUDIT_BATCH_MAX_WAIT_MS} ms`);
    row('call → queryable lag p99, ms', fmt(p99, 1), `${fmt(percentile(pubLatencies, 99), 2)} publish + ${fmt(percentile(oneRow, 99), 2)} INSERT`, '', `≤ ${fmt(GOALS.lagP99Ms)}: ${p99 <= GOALS.lagP99Ms ? 'met' : 'missed'}`);
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
  console.log(`seeded ${fmt(ROWS)} rows in ${fmt((performance.now() - started) / 1000, 1)} s`);
}

const seededAgents = Array.from({ length: AGENTS }, (_, k) => `agent-${k}`);
const emptyFilter = { agentIds: seededAgents, from: '', to: '', agent: '', service: '', tool: '', result: '', member: '', policy: '' };

async function benchQueries(store: AuditStore, session: Session): Promise<void> {
  const day = new Date(START_MS + 45 * 86_400_000).toISOString().slice(0, 10);
  const kinds: Array<[string, Partial<typeof emptyFilter>]> = [
    ['agent (name substring)', { agent: 'agent 17' }],
    ['service', { service: 'github' }],
    ['tool (substring)', { tool: 'tool_3' }],
    ['result', { result: 'DENY' }],
    ['member (id)', { member: seedMemberId(42) }],
    ['policy (db id)', { policy: 'policy-db-2' }],
    ['time range (one day)', { from: day, to: day }],
  ];
  for (const [label, over] of kinds) {
    const request: QueryRequest = { filter: { ...emptyFilter, ...over }, limit: 0, offset: 0 };
    const where = whereOf(parseFilter(request.filter));
    const countSql = `SELECT count() FROM {database:Identifier}.audit_entries FINAL WHERE ${where.sql}`;
    const timeHandler: number[] = [], timeCount: number[] = [];
    let total = 0;
    for (let run = -2; run < QUERY_RUNS; run += 1) {
      let at = performance.now();
      const response = await handleQuery({ store }, request);
      if (run >= 0) timeHandler.push(performance.now() - at);
      total = response.total;
      at = performance.now();
      await session.queryBindAsync(countSql, { database: DATABASE, ...where.params }, { format: 'TSV' });
      if (run >= 0) timeCount.push(performance.now() - at);
    }
    const p50 = percentile(timeHandler, 50), base = percentile(timeCount, 50);
    console.log(`query ${label}: handler p50 ${fmt(p50, 1)} ms, raw count() p50 ${fmt(base, 1)} ms, ${fmt(total)} matches`);
    row(`Query p50, ${label} (${fmt(total)} matches), ms`, fmt(p50, 1), `${fmt(base, 1)} (raw count())`, fmt(p50 / base, 1), `≤ ${GOALS.queryP50Ms}: ${p50 <= GOALS.queryP50Ms ? 'met' : 'missed'}`);
  }
}

async function benchExport(store: AuditStore, session: Session): Promise<void> {
  const server = createAuditGrpcServer({ store, log: (m, e) => console.error(m, e ?? '') });
  const address = await bindServer(server, '127.0.0.1:0');
  const client = new AuditQueryService(address, grpc.credentials.createInsecure()) as grpc.Client & Record<string, (...args: any[]) => any>;
  try {
    // Baseline: the engine's own CSV of the same columns, same FINAL in-order read, to nowhere.
    let started = performance.now();
    let baseRows = 0;
    const baseline = session.queryStreamBind(
      `SELECT timestamp, agent_name, member_name, tool, service, resource, decision, reason, duration_ms, matched_policy_ids
       FROM {database:Identifier}.audit_entries FINAL WHERE agent_id IN {agentIds:Array(String)}
       ORDER BY agent_id, timestamp, id SETTINGS max_block_size = 8192, max_threads = 1`,
      { database: DATABASE, agentIds: seededAgents }, { format: 'CSV' });
    for await (const chunk of baseline) baseRows += chunk.numRows;
    const baseRate = baseRows / ((performance.now() - started) / 1000);

    global.gc?.();
    const rssBefore = process.memoryUsage().rss;
    let peak = rssBefore;
    const timer = setInterval(() => { peak = Math.max(peak, process.memoryUsage().rss); }, 20);
    const cpu = process.cpuUsage();
    started = performance.now();
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
    clearInterval(timer);
    const exported = records - 1;
    const rate = exported / seconds;
    const growth = (peak - rssBefore) / 1e6;
    console.log(`export: ${fmt(exported)} rows (expected ${fmt(ROWS)}) in ${fmt(seconds, 2)} s = ${fmt(rate)} rows/s (${fmt(exported / cpuUsed)} per CPU-second), ${fmt(bytes / 1e6)} MB in ${fmt(chunks)} chunks; RSS ${fmt(rssBefore / 1e6)} → peak ${fmt(peak / 1e6)} MB (+${fmt(growth)} MB); engine CSV ${fmt(baseRate)} rows/s`);
    row(`CSV export over gRPC, rows/s (${fmt(exported)} rows)`, fmt(rate), `${fmt(baseRate)} (engine CSV, no gRPC)`, fmt(rate / baseRate, 2), `≥ ${fmt(GOALS.exportRowsPerS)}: ${rate >= GOALS.exportRowsPerS ? 'met' : 'missed'}`);
    row('CSV export, peak RSS growth, MB', fmt(growth), `RSS before ${fmt(rssBefore / 1e6)} MB`, '', 'flat');
  } finally {
    client.close();
    server.forceShutdown();
  }
}

await main();
