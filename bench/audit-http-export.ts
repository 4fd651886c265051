/**
 * The `http-export` phase of bench/audit: the CSV export the way an analyst pulls it,
 * `GET /api/audit/export?exportAll=true` on a real gateway process, answered by a real audit
 * service process over gRPC (split mode, started as the e2e tests start it: Postgres from
 * `createTestDatabase`, NATS JetStream at `TEST_NATS_URL`).
 *
 * The analyst is an owner signed in through the magic-link outbox; their agents (`Agent <k>`,
 * owner memberships) are written to Postgres directly, as the tests' fixtures do, since a
 * hundred agents through the API would only measure the API. The audit rows are seeded into
 * the audit service's chDB directory before the service starts on it: chDB lets one process
 * at a time open a directory, and building millions of rows inside the engine takes seconds
 * where publishing them would take minutes.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { drainPending, Session } from 'chdb';
import { schema, type Database } from '@portcullis/core';
import { openAuditStore } from '../services/audit/src/store/audit-store.ts';
import { seedStatement } from '../services/audit/src/testing/seed-audit-rows.ts';
import { untilMergesSettle } from './store-settle.ts';
import { apiClient, signInThroughOutbox, type ApiClient } from '../test/support/api-client.ts';
import { startSplitTopology } from '../test/support/split-topology.ts';
import { engineCsvExport } from './engine-csv-baseline.ts';
import { cpuSecondsOf, sampleRss, type RssGrowth } from './rss-sampler.ts';

/** The rows to seed: what bench/audit seeds for its other phases, for the analyst's agents. */
export interface SeedShape {
  database: string;
  rows: number;
  agents: number;
  startMs: number;
  stepMs: number;
  /** Rows per seeding statement. */
  chunk: number;
}

export interface HttpExportFigures {
  seedSeconds: number;
  /** `total` of `GET /api/audit` for the analyst once the service is up: every seeded row. */
  visibleRows: number;
  /** CSV records received, header excluded. */
  rows: number;
  bytes: number;
  seconds: number;
  rowsPerSecond: number;
  /** During the fast read: the gateway, the audit service and this process (the HTTP client). */
  rss: Record<'gateway' | 'audit' | 'bench', RssGrowth>;
  /** The engine's own CSV of the same rows, same order, measured while seeding. */
  engineCsvRowsPerSecond: number;
  slow: { bytes: number; seconds: number; rss: Record<'gateway' | 'audit', RssGrowth> };
}

const ANALYST_EMAIL = 'analyst@example.com';
const EXPORT_PATH = '/api/audit/export?exportAll=true';
const STAGING_DATABASE = 'bench_staging';
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Starts the topology, seeds `shape.rows` rows for the analyst's agents, then reads the whole
 * export as fast as possible and, a second time, at `slow.bytesPerSecond` for `slow.seconds`
 * before hanging up. RSS of each process sampled every 50 ms.
 */
export async function benchHttpExport(shape: SeedShape, slow = { bytesPerSecond: 2_000_000, seconds: 5 }): Promise<HttpExportFigures> {
  const topology = await startSplitTopology();
  const auditDataDir = mkdtempSync(join(tmpdir(), 'portcullis-bench-http-export-'));
  try {
    const analyst = apiClient(topology.gateways[0]!);
    const { user } = await signInThroughOutbox(analyst, topology.outboxDir, ANALYST_EMAIL);
    const agentIds = await createOwnedAgents(topology.database.db, user.id, shape.agents);

    let started = performance.now();
    // The service's store path is `DATA_DIR/audit` (services/audit/src/config.ts, storeOptionsOf).
    const engineCsv = await seedOwnedRows(join(auditDataDir, 'audit'), shape, agentIds);
    const seedSeconds = (performance.now() - started) / 1000;
    const audit = await topology.restart('audit', { DATA_DIR: auditDataDir });
    const visibleRows = await untilAuditAnswers(analyst);
    const exportUrl = `${topology.gateways[0]}${EXPORT_PATH}`;
    const pids = { gateway: topology.processes.gateway0!.child.pid!, audit: audit.child.pid! };

    const fast = sampleRss({ ...pids, bench: process.pid });
    const cpuBefore = { gateway: cpuSecondsOf(pids.gateway), audit: cpuSecondsOf(pids.audit), bench: cpuSecondsOf(process.pid) };
    started = performance.now();
    const { bytes, lines } = await readAll(exportUrl, analyst.cookie);
    const seconds = (performance.now() - started) / 1000;
    const rss = fast.stop();
    console.log(`http export (gateway): CPU seconds during the export — gateway ${(cpuSecondsOf(pids.gateway) - cpuBefore.gateway).toFixed(1)}, audit ${(cpuSecondsOf(pids.audit) - cpuBefore.audit).toFixed(1)}, bench process ${(cpuSecondsOf(process.pid) - cpuBefore.bench).toFixed(1)} (the download itself is curl), over ${seconds.toFixed(1)} s of wall time`);
    const rows = lines - 1;

    const slowSampler = sampleRss(pids);
    const slowRead = await readSlowlyThenHangUp(exportUrl, analyst.cookie, slow.bytesPerSecond, slow.seconds);
    const slowRss = slowSampler.stop();

    return {
      seedSeconds, visibleRows, rows, bytes, seconds, rowsPerSecond: rows / seconds, rss,
      engineCsvRowsPerSecond: engineCsv.rowsPerSecond, slow: { ...slowRead, rss: slowRss },
    };
  } finally {
    await topology.stop();
    rmSync(auditDataDir, { recursive: true, force: true });
  }
}

/** `count` agents named `Agent <k>` (the names the seed writes), each owned by `userId`; ids by k. */
async function createOwnedAgents(db: Database, userId: string, count: number): Promise<string[]> {
  const created = await db.insert(schema.agents)
    .values(Array.from({ length: count }, (_, k) => ({ name: `Agent ${k}`, createdBy: userId })))
    .returning({ id: schema.agents.id, name: schema.agents.name });
  const idByName = new Map(created.map((a) => [a.name, a.id]));
  const agentIds = Array.from({ length: count }, (_, k) => idByName.get(`Agent ${k}`)!);
  await db.insert(schema.members).values(agentIds.map((agentId) => ({
    agentId, userId, email: ANALYST_EMAIL, role: 'owner' as const, status: 'approved' as const, approvedAt: new Date(),
  })));
  return agentIds;
}

/**
 * Seeds `shape.rows` rows at `storePath` whose agent ids are `agentIds` (the seed's `agent-<k>`
 * becomes `agentIds[k]`), and measures the engine's CSV of them. The seed statement writes its
 * own agent ids, so each chunk goes into a staging copy of the table first and then into
 * `audit_entries` with the ids swapped: a real INSERT into the real table, so whatever the
 * store hangs on it (materialized views, indexes) sees the rows as it would see the writer's.
 * Everything is closed again before returning, so another process can open the directory.
 */
async function seedOwnedRows(storePath: string, shape: SeedShape, agentIds: readonly string[]): Promise<{ rowsPerSecond: number }> {
  if (!IDENTIFIER.test(shape.database)) throw new Error(`not an identifier: ${JSON.stringify(shape.database)}`);
  const store = await openAuditStore({ target: { kind: 'chdb', path: storePath }, database: shape.database }); // applies the migrations
  const session = new Session(storePath);
  const names = { database: shape.database, staging: STAGING_DATABASE };
  const run = (sql: string, params: Record<string, unknown> = {}) => session.queryBindAsync(sql, { ...names, ...params }, { format: 'TSV' });
  try {
    await run('CREATE DATABASE IF NOT EXISTS {staging:Identifier}');
    // The engine refuses a bound identifier after `AS` (a syntax error), so this one DDL
    // statement names the tables in its text: the staging name is ours, the database checked above.
    await run(`CREATE TABLE ${STAGING_DATABASE}.audit_entries AS ${shape.database}.audit_entries`);
    const seedAgentIds = Array.from({ length: shape.agents }, (_, k) => `agent-${k}`);
    for (let first = 0; first < shape.rows; first += shape.chunk) {
      const { sql, params } = seedStatement({
        database: STAGING_DATABASE, count: Math.min(shape.chunk, shape.rows - first), first, agents: shape.agents, startMs: shape.startMs, stepMs: shape.stepMs,
      });
      await session.queryBindAsync(sql, params, { format: 'TSV' });
      await run(
        `INSERT INTO {database:Identifier}.audit_entries
         SELECT * REPLACE (transform(agent_id, {seedAgentIds:Array(String)}, {agentIds:Array(String)}, '') AS agent_id)
         FROM {staging:Identifier}.audit_entries`,
        { seedAgentIds, agentIds: [...agentIds] });
      await run('TRUNCATE TABLE {staging:Identifier}.audit_entries');
    }
    await run('DROP DATABASE {staging:Identifier}');
    console.log(`http export (gateway): background merges settled ${(await untilMergesSettle(session)).toFixed(1)} s after the seed`);
    return await engineCsvExport(session, shape.database, agentIds);
  } finally {
    session.close();
    await store.close();
    await drainPending();
  }
}

/**
 * Waits until the gateway answers `GET /api/audit` (its gRPC channel reconnects to the audit
 * service started a moment ago on its own schedule) and returns the analyst's `total`.
 */
async function untilAuditAnswers(analyst: ApiClient, timeoutMs = 60_000): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const res = await analyst.call('GET', '/api/audit?limit=1');
    if (res.status === 200) return Number(res.body.total);
    if (performance.now() > deadline) throw new Error(`GET /api/audit still answers ${res.status} after ${timeoutMs} ms: ${res.text}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Sends the export request; resolves once a 200 response has started (anything else throws with its body). */
function openExport(url: string, cookie: string): Promise<{ request: http.ClientRequest; response: http.IncomingMessage }> {
  return new Promise((resolve, reject) => {
    const request = http.get(url, { headers: { cookie } }, (response) => {
      if (response.statusCode === 200) return resolve({ request, response });
      let text = '';
      response.setEncoding('utf8').on('data', (c: string) => { text += c; }).on('end', () => reject(new Error(`GET ${url} answered ${response.statusCode}: ${text}`)));
    });
    request.on('error', reject);
  });
}

/**
 * Reads the whole export as an analyst's tool does, as fast as it can: `curl` into `wc`, so the
 * client's own CPU (a Node reader spent a core's worth counting lines) is not what limits the
 * figure. Bytes and newline count; throws if the transfer is cut off (curl --fail, exit code).
 */
async function readAll(url: string, cookie: string): Promise<{ bytes: number; lines: number }> {
  return countedDownload('set -o pipefail; curl --silent --show-error --fail -H "cookie: $COOKIE" "$URL" | tee >(wc -c >&2) | wc -l', { COOKIE: cookie, URL: url });
}

/** Runs `script` in bash (for the process substitution): `lines` from its stdout, `bytes` from its stderr. */
function countedDownload(script: string, env: Record<string, string>): Promise<{ bytes: number; lines: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', script], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    child.stdout.on('data', (c: Buffer) => { out += c.toString(); });
    child.stderr.on('data', (c: Buffer) => { err += c.toString(); });
    child.on('exit', (code) => {
      const bytes = Number(err.trim().split(/\s+/).at(-1));
      if (code !== 0 || !Number.isFinite(bytes)) return reject(new Error(`the download exited ${code}: ${err}`));
      resolve({ lines: Number(out.trim()), bytes });
    });
  });
}

/**
 * Reads the export at about `bytesPerSecond` (pausing between chunks, so TCP's window and the
 * gateway's backpressure are what hold the rest back) for `seconds`, then hangs up.
 */
async function readSlowlyThenHangUp(url: string, cookie: string, bytesPerSecond: number, seconds: number): Promise<{ bytes: number; seconds: number }> {
  const { request, response } = await openExport(url, cookie);
  const started = performance.now();
  const until = started + seconds * 1000;
  let bytes = 0;
  for await (const chunk of response as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    const now = performance.now();
    if (now >= until) break;
    const due = started + (bytes / bytesPerSecond) * 1000;
    if (due > now) await new Promise((r) => setTimeout(r, Math.min(due, until) - now));
  }
  request.destroy();
  return { bytes, seconds: (performance.now() - started) / 1000 };
}
