/**
 * `npm run bench`: one entry point over every benchmark, with a summary table at the end.
 * Runs bench/mcp-overhead, bench/pdp and bench/audit as child processes at quick sizes (each
 * prints its own full report as it goes; run them alone for the full sizes), then measures
 * gateway throughput with 1 and with 2 gateway replicas (split processes on the machine's NATS
 * and Postgres, 64 calls in flight, against the same upstream called directly). Not a test:
 * nothing asserts on time. bench/noisy-neighbour (issue 29) runs at its own defaults, since its
 * targets are judged on them. Knobs: BENCH_SUMMARY_SECONDS (8), BENCH_SUMMARY_SKIP (e.g. `audit,noisy-neighbour`),
 * BENCH_NODE_OPTIONS (NODE_OPTIONS of the split processes, e.g. `--import=<a script that profiles>`).
 */
import { spawn } from 'node:child_process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { isolatingFetch } from '@portcullis/core';
import { apiClient, signInThroughOutbox } from '../test/support/api-client.ts';
import { addMember, sandboxTokenIssuer } from '../test/support/fixtures.ts';
import { repoRoot } from '../test/support/processes.ts';
import { startSplitTopology } from '../test/support/split-topology.ts';
import { readdirSync, readFileSync } from 'node:fs';
import { stageBreakdown, stageTotals } from './stage-totals.ts';
import { cpuByThreadOf, cpuTimesOf } from './rss-sampler.ts';

const SECONDS = Number(process.env.BENCH_SUMMARY_SECONDS ?? 8);
const SKIP = new Set((process.env.BENCH_SUMMARY_SKIP ?? '').split(',').filter(Boolean));
const rows: string[][] = [];
const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

/** Runs a benchmark script, echoing and returning its output. */
function run(script: string, env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    console.log(`\n=== ${script} ${Object.entries(env).map(([k, v]) => `${k}=${v}`).join(' ')}`);
    const child = spawn(process.execPath, ['--import', 'tsx', script], { cwd: repoRoot, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => { out += chunk; process.stdout.write(chunk); });
    child.once('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`${script} exited ${code}`))));
  });
}
const pick = (text: string, re: RegExp) => re.exec(text)?.slice(1) ?? [];

async function client(url: string, key: string) {
  const c = new Client({ name: 'bench-summary', version: '1' });
  await c.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: isolatingFetch, requestInit: { headers: { Authorization: `Bearer ${key}` } } }));
  return c;
}

/** The pid of the machine's `nats-server`, if one runs (split mode's bus: its CPU is part of each call). */
function natsServerPid(): number | undefined {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try { if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === 'nats-server') return Number(entry); } catch { /* ended */ }
  }
  return undefined;
}

/** Calls/s of `tool` with 64 in flight over `urls` (one MCP session per in-flight slot, spread over them), and the CPU µs a call of each process in `pids`. */
async function saturate(urls: string[], key: string, tool: string, seconds: number, pids: Record<string, number> = {}): Promise<number> {
  const clients = await Promise.all(Array.from({ length: 64 }, (_, i) => client(urls[i % urls.length]!, key)));
  let done = 0;
  const until = performance.now() + seconds * 1000;
  const cpu = () => Object.fromEntries(Object.entries(pids).map(([name, pid]) => { const t = cpuTimesOf(pid); return [name, t.user + t.system]; }));
  const cpuBefore = cpu();
  const threadsBefore = pids.audit ? cpuByThreadOf(pids.audit) : undefined;
  const started = performance.now();
  await Promise.all(clients.map(async (c) => {
    while (performance.now() < until) {
      await c.callTool({ name: tool, arguments: {} });
      done += 1;
    }
  }));
  const rate = done / ((performance.now() - started) / 1000);
  const cpuAfter = cpu();
  if (done > 0 && Object.keys(pids).length > 0) {
    console.log(`  CPU µs a call at ${fmt(rate)} calls/s: ${Object.keys(pids).map((name) => `${name} ${fmt((cpuAfter[name]! - cpuBefore[name]!) / done * 1e6)}`).join(', ')}`);
    if (threadsBefore) {
      const threads = [...cpuByThreadOf(pids.audit!)].map(([name, sec]) => [name, sec - (threadsBefore.get(name) ?? 0)] as const).filter(([, sec]) => sec > 0).sort((a, b) => b[1] - a[1]).slice(0, 5);
      console.log(`    the audit service by thread: ${threads.map(([name, sec]) => `${name} ${fmt(sec / done * 1e6)}`).join(', ')}`);
    }
  }
  await Promise.all(clients.map((c) => c.close()));
  return rate;
}

async function replicas() {
  const t = await startSplitTopology({ gatewayCount: 2, env: { LOG_LEVEL: 'error', ...(process.env.BENCH_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_NODE_OPTIONS } : {}) } });
  try {
    const owner = apiClient(t.gateways[0]!);
    await signInThroughOutbox(owner, t.outboxDir, 'bench@example.com');
    const agentId = (await owner.call('POST', '/api/agents', { name: 'Bench' })).body.id as string;
    await owner.call('PUT', `/api/agents/${agentId}/services`, { services: ['github'] });
    const token = await sandboxTokenIssuer(t.sandboxUrl)('github', { login: 'bench', name: 'Bench' });
    const { memberKey } = await addMember(t.database.db, { agentId, email: 'bench-member@example.com', status: 'approved', connect: { github: token } });
    // Sequential first: what one call through the split gateway adds to the same call made directly.
    const [d, g] = [await client(`${t.sandboxUrl}/github/mcp`, token), await client(`${t.gateways[0]}/mcp`, memberKey)];
    const sequentialMs = async (c: Client, tool: string) => {
      const latencies: number[] = [];
      for (let i = 0; i < 1_500; i++) {
        const t0 = performance.now();
        await c.callTool({ name: tool, arguments: {} });
        if (i >= 500) latencies.push(performance.now() - t0); // the first 500 warm up
      }
      latencies.sort((a, b) => a - b);
      return { p50: latencies[Math.floor(latencies.length / 2)]!, p99: latencies[Math.floor(latencies.length * 0.99)]! };
    };
    const seqDirect = await sequentialMs(d, 'get_me');
    const scrape = async () => stageTotals(await (await fetch(`${t.gateways[0]}/metrics`)).text());
    const before = await scrape();
    const seqGateway = await sequentialMs(g, 'github__get_me');
    console.log(`\n${stageBreakdown(before, await scrape()).join('\n')}`);
    await Promise.all([d.close(), g.close()]);
    console.log(`\nsplit mode, sequential: direct p50 ${seqDirect.p50.toFixed(3)} ms p99 ${seqDirect.p99.toFixed(3)} ms; gateway p50 ${seqGateway.p50.toFixed(3)} ms p99 ${seqGateway.p99.toFixed(3)} ms; added p50 ${(seqGateway.p50 - seqDirect.p50).toFixed(3)} ms`);
    rows.push(['split mode: sequential ALLOW added p50 / p99', `${(seqGateway.p50 - seqDirect.p50).toFixed(3)} / ${(seqGateway.p99 - seqDirect.p99).toFixed(3)} ms`, `direct p50 ${seqDirect.p50.toFixed(3)} ms`, '']);
    const nats = natsServerPid();
    const pids = { client: process.pid, ...Object.fromEntries(Object.entries(t.processes).map(([name, p]) => [name, p.child.pid!])), ...(nats ? { 'nats-server': nats } : {}) };
    const direct = await saturate([`${t.sandboxUrl}/github/mcp`], token, 'get_me', SECONDS, pids);
    const one = await saturate([`${t.gateways[0]}/mcp`], memberKey, 'github__get_me', SECONDS, pids);
    const two = await saturate(t.gateways.map((g) => `${g}/mcp`), memberKey, 'github__get_me', SECONDS, pids);
    console.log(`\nreplicas: direct ${fmt(direct)} calls/s, 1 gateway ${fmt(one)} calls/s, 2 gateways ${fmt(two)} calls/s`);
    rows.push(['throughput, 1 gateway (64 in flight)', `${fmt(one)} calls/s`, `direct ${fmt(direct)}`, (one / direct).toFixed(2)]);
    rows.push(['throughput, 2 gateways (64 in flight)', `${fmt(two)} calls/s`, `1 gateway ${fmt(one)}`, (two / one).toFixed(2)]);
  } finally {
    await t.stop();
  }
}

if (!SKIP.has('mcp-overhead')) {
  const out = await run('bench/mcp-overhead.ts', { BENCH_RATES: '100', BENCH_SECONDS: String(Math.min(SECONDS, 5)) });
  const [r16, r64] = pick(out, /saturation ratio gateway\/direct: 16 in flight ([\d.]+), 64 in flight ([\d.]+)/);
  const [added50, added99] = pick(out, /\| gateway tools\/call ALLOW \| [\d.]+ \| [\d.]+ \| \*\*([-\d.]+)\*\* \| \*\*([-\d.]+)\*\* \|/);
  rows.push(['gateway overhead: sequential ALLOW added p50 / p99', `${added50 ?? '?'} / ${added99 ?? '?'} ms`, 'direct call in the same run', '']);
  rows.push(['gateway overhead: saturation gateway ÷ direct (16 / 64 in flight)', `${r16 ?? '?'} / ${r64 ?? '?'}`, '', '']);
}
if (!SKIP.has('pdp')) {
  const out = await run('bench/pdp.ts', { BENCH_SIZES: '100', BENCH_CALLS: '3000', BENCH_WARMUP: '1000' });
  const [bare] = pick(out, /bare gRPC \(constant answer, transport only\): p50 ([\d.]+) µs/);
  const [local, remote] = pick(out, /100 policies, ALLOW, returning member: in-process p50 ([\d.]+) µs, gRPC p50 ([\d.]+) µs/);
  rows.push(['PDP Authorize p50, 100 policies, over gRPC', `${remote} µs`, `bare gRPC ${bare} µs; in-process ${local} µs`, remote && bare ? (Number(remote) / Number(bare)).toFixed(2) : '?']);
  // The gateway's path: verdicts over long-lived AuthorizeStream streams (decision 031).
  const [bareStream] = pick(out, /bare gRPC stream \(constant answer, transport only\): p50 ([\d.]+) µs/);
  const [streamed] = pick(out, /100 policies, ALLOW, returning member: .*, stream p50 ([\d.]+) µs/);
  rows.push(['PDP Authorize p50, 100 policies, over the stream', `${streamed} µs`, `bare stream ${bareStream} µs`, streamed && bareStream ? (Number(streamed) / Number(bareStream)).toFixed(2) : '?']);
}
if (!SKIP.has('audit')) {
  const out = await run('bench/audit.ts', { BENCH_ROWS: '1000000', BENCH_INGEST: '20000', BENCH_LAG_SECONDS: '5', BENCH_QUERY_RUNS: '5' });
  const [writer, direct] = pick(out, /ingest: writer ([\d,]+) entries\/s.*direct INSERT ([\d,]+)\/s/);
  const [lag50, lag99] = pick(out, /lag: p50 ([\d.,]+) ms, p99 ([\d.,]+) ms/);
  const [query, raw] = pick(out, /query agent[^:]*: handler p50 ([\d.,]+) ms, raw count\(\) p50 ([\d.,]+) ms/);
  const [exportRate, engineRate] = pick(out, /export: .* = ([\d,]+) rows\/s .*engine CSV ([\d,]+) rows\/s/);
  const num = (s?: string) => Number((s ?? '').replace(/,/g, ''));
  rows.push(['audit ingest per writer', `${writer} entries/s`, `direct INSERT ${direct}/s`, (num(writer) / num(direct)).toFixed(2)]);
  rows.push(['audit lag p50 / p99', `${lag50} / ${lag99} ms`, '', '']);
  rows.push(['audit query p50 (agent filter, 1M rows)', `${query} ms`, `raw count() ${raw} ms`, (num(query) / num(raw)).toFixed(2)]);
  rows.push(['CSV export (1M rows)', `${exportRate} rows/s`, `engine CSV ${engineRate} rows/s`, (num(exportRate) / num(engineRate)).toFixed(2)]);
}
if (!SKIP.has('noisy-neighbour')) {
  // Its own defaults (15 s idle, 60 s beside tenant B): the targets are judged on these.
  const out = await run('bench/noisy-neighbour.ts', {});
  for (const probe of ['tools/call', '/api/status', 'audit query']) {
    const [idle50, idle99, during50, during99, r50, r99, verdict] = pick(out, new RegExp(`\\| ${probe.replace('/', '\\/')} \\| ([\\d.]+) \\| ([\\d.]+) \\| ([\\d.]+) \\| ([\\d.]+) \\| \\*\\*([\\d.]+)\\*\\* \\| \\*\\*([\\d.]+)\\*\\* \\| ([^|]+) \\|`));
    rows.push([`noisy neighbour: tenant A's ${probe} p50 / p99 beside tenant B`, `${during50} / ${during99} ms`, `A alone ${idle50} / ${idle99} ms`, `${r50} / ${r99} (${verdict?.trim()})`]);
  }
  const [accepted, refused] = pick(out, /\| tools\/call \| (\d+) \| (\d+) \| \d+ \|/);
  rows.push(['noisy neighbour: tenant B\'s tools/call accepted / refused', `${accepted} / ${refused}`, '', '']);
}
if (!SKIP.has('replicas')) await replicas();

console.log('\n| measure | figure | baseline in the same run | ratio |\n|---|---:|---|---:|');
for (const r of rows) console.log(`| ${r.join(' | ')} |`);
process.exit(0);
