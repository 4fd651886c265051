/**
 * bench/mcp-overhead: what the gateway adds to a tool call.
 *
 * Starts the single-process product (gateway + policy + audit) against the machine's
 * Postgres, with the sandbox GitHub upstream in a process of its own, puts 100 forbid policies on the demo agent (none matching the call, so
 * Cedar evaluates all of them), and measures `tools/call github__get_me`:
 *   - direct: MCP SDK client → sandbox GitHub upstream
 *   - gateway: MCP SDK client → /mcp → Cedar verdict over gRPC → upstream → audit on the bus
 * sequentially (ALLOW, DENY, ping; with the product's per-stage means from its own histograms),
 * at fixed rates (latency p50/p99; 100 and 500 calls/s by default) and at saturation (16 and 64 in flight).
 * Prints the figures, the added latency and the throughput ratio. Not a test: no assertions.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { eq, sql } from 'drizzle-orm';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { connectors, isolatingFetch, openDatabase, schema } from '@portcullis/core';
import { createTestDatabase } from '@portcullis/core/testing';
import { freePort, LOAD_TEST_QUOTAS, startTs } from '../test/support/processes.ts';
import { sandboxTokenIssuer } from '../test/support/fixtures.ts';
import { stageBreakdown, stageTotals } from './stage-totals.ts';
import { cpuByThreadOf, cpuTimesOf } from './rss-sampler.ts';

/** A comma-separated list of positive numbers; empty skips that phase. */
const numbers = (text: string) => text.split(',').map(Number).filter((n) => n > 0);
const RATES = numbers(process.env.BENCH_RATES ?? '100,500');
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const CONCURRENCIES = numbers(process.env.BENCH_CONCURRENCY ?? '16,64');
const SEQUENTIAL = Number(process.env.BENCH_SEQUENTIAL ?? 2_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);
const POLICIES = Number(process.env.BENCH_POLICIES ?? 100);

async function connect(url: string, token: string) {
  const client = new Client({ name: 'bench', version: '1' });
  const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: isolatingFetch, requestInit: { headers: { Authorization: `Bearer ${token}` } } });
  await client.connect(transport);
  return client;
}

function percentile(sorted: number[], p: number) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** Open loop at a fixed rate: latencies in ms. */
async function fixedRate(call: () => Promise<unknown>, rate: number, seconds: number) {
  const total = rate * seconds;
  const interval = 1000 / rate;
  const latencies: number[] = [];
  const started = performance.now();
  const pending: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const due = started + i * interval;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    pending.push((async () => {
      const t0 = performance.now();
      await call();
      latencies.push(performance.now() - t0);
    })());
  }
  await Promise.all(pending);
  latencies.sort((a, b) => a - b);
  return { p50: percentile(latencies, 50), p99: percentile(latencies, 99), achieved: total / ((performance.now() - started) / 1000) };
}

/**
 * One call at a time, the paths taken in turn in blocks of `block` calls (a warm path, as in
 * steady use, while a change in the machine's speed during the phase falls on every path
 * alike): latencies in ms.
 */
async function sequential<K extends string>(calls: Record<K, () => Promise<unknown>>, each: number, block = 100) {
  const names = Object.keys(calls) as K[];
  const latencies = Object.fromEntries(names.map((name) => [name, [] as number[]])) as Record<K, number[]>;
  for (let done = 0; done < each; done += block) {
    for (const name of names) {
      for (let i = done; i < Math.min(each, done + block); i++) {
        const t0 = performance.now();
        await calls[name]();
        latencies[name].push(performance.now() - t0);
      }
    }
  }
  return Object.fromEntries(names.map((name) => {
    const sorted = latencies[name].sort((a, b) => a - b);
    return [name, { p50: percentile(sorted, 50), p99: percentile(sorted, 99) }];
  })) as Record<K, { p50: number; p99: number }>;
}

/** Closed loop with `concurrency` in flight: calls per second. */
async function saturation(call: () => Promise<unknown>, concurrency: number, seconds: number) {
  let done = 0;
  const until = performance.now() + seconds * 1000;
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (performance.now() < until) { await call(); done++; }
  }));
  return done / ((performance.now() - started) / 1000);
}

/** `BENCH_PRODUCT_ENV=A=1,B=2`: settings for the product under test (to measure one against its default). */
function productEnv(): Record<string, string> {
  return Object.fromEntries((process.env.BENCH_PRODUCT_ENV ?? '').split(',').filter(Boolean).map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]));
}

async function main() {
  const db = await createTestDatabase('bench');
  const dataDir = mkdtempSync(join(tmpdir(), 'pc-bench-'));
  const [port, sandboxPort, passthroughPort] = await Promise.all([freePort(), freePort(), freePort()]);
  const secret = randomBytes(32).toString('base64url');
  // The upstream runs in its own process, as a real connector would: its CPU is not the gateway's.
  const sandbox = startTs('services/sandbox/src/main.ts', { SANDBOX_PORT: String(sandboxPort), PORTCULLIS_SECRET: secret, LOG_LEVEL: 'warn', DATA_DIR: dataDir }, 'sandbox');
  await sandbox.waitFor(/sandbox listening/);
  const sandboxUrl = `http://127.0.0.1:${sandboxPort}`;
  // The bare-transport baseline: a plain Node proxy in a process of its own, enforcing nothing.
  const passthrough = startTs('bench/passthrough.ts', { PASSTHROUGH_PORT: String(passthroughPort), PASSTHROUGH_UPSTREAM: `${sandboxUrl}/github/mcp` }, 'passthrough');
  await passthrough.waitFor(/passthrough listening/);
  const product = startTs('services/standalone/src/main.ts', {
    PORT: String(port), DATA_DIR: dataDir, DATABASE_URL: db.url, LOG_LEVEL: 'warn', MAIL_URL: `file://${dataDir}/outbox`, PORTCULLIS_SECRET: secret,
    ...Object.fromEntries(connectors.map((c) => [`UPSTREAM_${c.key.toUpperCase()}_URL`, `${sandboxUrl}/${c.key}/mcp`])),
    // One key at thousands of calls a second is the measurement, not an abuse (decision 069).
    ...LOAD_TEST_QUOTAS,
    ...productEnv(),
  }, 'standalone', process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : []);
  try {
    const [, memberKey] = await product.waitFor(/Member key\s+(pcm_[A-Za-z0-9_-]{43})/, 120_000);

    // 100 enabled forbid policies on the demo agent, none of which matches get_me.
    const handle = await openDatabase({ DATABASE_URL: db.url, DATA_DIR: dataDir });
    const [agent] = await handle.db.select().from(schema.agents);
    const otherTools = connectors.find((c) => c.key === 'github')!.tools.filter((t) => t.name !== 'get_me');
    await handle.db.insert(schema.policies).values(Array.from({ length: POLICIES }, (_, i) => ({
      agentId: agent!.id,
      policyKey: `bench-${i}`,
      name: `Bench policy ${i}`,
      service: 'github',
      effect: 'forbid' as const,
      tools: [otherTools[i % otherTools.length]!.name],
      principal: { type: 'all_members' as const },
      denyMessage: `bench ${i}`,
    })));
    await handle.db.update(schema.agents).set({ policyVersion: sql`${schema.agents.policyVersion} + 1` }).where(eq(schema.agents.id, agent!.id));
    await handle.close();

    const token = await sandboxTokenIssuer(sandboxUrl)('github', { login: 'bench', name: 'Bench' });
    const direct = await connect(`${sandboxUrl}/github/mcp`, token);
    const gateway = await connect(`http://127.0.0.1:${port}/mcp`, memberKey!);
    const proxied = await connect(`http://127.0.0.1:${passthroughPort}/mcp`, token);
    const callDirect = () => direct.callTool({ name: 'get_me', arguments: {} });
    const callPassthrough = () => proxied.callTool({ name: 'get_me', arguments: {} });
    const callGateway = async () => {
      const r = await gateway.callTool({ name: 'github__get_me', arguments: {} });
      if (r.isError) throw new Error(`gateway denied the bench call: ${JSON.stringify(r.content)}`);
    };

    const deniedTool = `github__${otherTools[0]!.name}`;
    const callDenied = async () => {
      const r = await gateway.callTool({ name: deniedTool, arguments: { owner: 'acme', repo: 'api' } });
      if (!r.isError) throw new Error('the bench policy did not deny its tool');
    };
    const pingGateway = () => gateway.ping();
    const pingDirect = () => direct.ping();

    // Warm up both paths (JIT, connection pools, the PDP's prepared set).
    process.stderr.write('bench: warm-up\n');
    for (let i = 0; i < 500; i++) { await callDirect(); await callPassthrough(); await callGateway(); await callDenied(); await pingGateway(); }

    const f = (n: number) => n.toFixed(3);
    const report: string[] = [];

    // Sequential: one call at a time, the product's own stage histograms read before and after.
    process.stderr.write('bench: sequential\n');
    const metricsUrl = `http://127.0.0.1:${port}/metrics`;
    const before = stageTotals(await (await fetch(metricsUrl)).text());
    const seq = await sequential({ direct: callDirect, passthrough: callPassthrough, allow: callGateway, deny: callDenied, ping: pingGateway, directPing: pingDirect }, SEQUENTIAL);
    const after = stageTotals(await (await fetch(metricsUrl)).text());
    report.push(`| sequential (${SEQUENTIAL} each) | p50 ms | p99 ms | added p50 ms | added p99 ms |`, '|---|---:|---:|---:|---:|');
    report.push(`| direct tools/call | ${f(seq.direct.p50)} | ${f(seq.direct.p99)} | | |`);
    report.push(`| bare Node passthrough tools/call (enforces nothing) | ${f(seq.passthrough.p50)} | ${f(seq.passthrough.p99)} | ${f(seq.passthrough.p50 - seq.direct.p50)} | ${f(seq.passthrough.p99 - seq.direct.p99)} |`);
    report.push(`| gateway tools/call ALLOW | ${f(seq.allow.p50)} | ${f(seq.allow.p99)} | **${f(seq.allow.p50 - seq.direct.p50)}** | **${f(seq.allow.p99 - seq.direct.p99)}** |`);
    report.push(`| direct ping (the bare SDK round trip) | ${f(seq.directPing.p50)} | ${f(seq.directPing.p99)} | | |`);
    report.push(`| gateway tools/call DENY (no upstream) | ${f(seq.deny.p50)} | ${f(seq.deny.p99)} | **${f(seq.deny.p50 - seq.directPing.p50)}** | **${f(seq.deny.p99 - seq.directPing.p99)}** |`);
    report.push(`| gateway ping | ${f(seq.ping.p50)} | ${f(seq.ping.p99)} | **${f(seq.ping.p50 - seq.directPing.p50)}** | **${f(seq.ping.p99 - seq.directPing.p99)}** |`);
    report.push('', ...stageBreakdown(before, after), '');

    // CPU per call of each process on the way (all threads, user + system): the two cores are
    // shared, so what a proxy spends per call is what the client and the upstream cannot.
    const pids = { client: process.pid, upstream: sandbox.child.pid!, passthrough: passthrough.child.pid!, gateway: product.child.pid! };
    /** CPU of the processes on a path (and the gateway's by thread), summed over the measurements given to it. */
    const cpuMeter = (proxy: 'passthrough' | 'gateway' | undefined) => {
      const names = ['client', 'upstream', ...(proxy ? [proxy] : [])] as const;
      const spent = names.map(() => ({ user: 0, system: 0 }));
      const threads = new Map<string, number>();
      let calls = 0;
      return {
        async measure<T extends { rate: number }>(run: () => Promise<T>): Promise<T> {
          const before = names.map((name) => cpuTimesOf(pids[name]));
          const threadsBefore = proxy === 'gateway' ? cpuByThreadOf(pids.gateway) : undefined;
          const started = performance.now();
          const result = await run();
          const after = names.map((name) => cpuTimesOf(pids[name]));
          names.forEach((_, i) => {
            spent[i]!.user += after[i]!.user - before[i]!.user;
            spent[i]!.system += after[i]!.system - before[i]!.system;
          });
          if (threadsBefore) for (const [name, seconds] of cpuByThreadOf(pids.gateway)) threads.set(name, (threads.get(name) ?? 0) + seconds - (threadsBefore.get(name) ?? 0));
          calls += result.rate * (performance.now() - started) / 1000;
          return result;
        },
        report(): string {
          const us = (seconds: number) => Math.round(seconds / calls * 1e6);
          const parts = names.map((name, i) => `${name} ${us(spent[i]!.user + spent[i]!.system)} (sys ${us(spent[i]!.system)})`);
          // The gateway process by thread name: its event loop ("node"), the engine's pools, GC helpers…
          const top = [...threads].filter(([, seconds]) => seconds > 0).sort((a, b) => b[1] - a[1]).slice(0, 4).map(([name, seconds]) => `${name} ${us(seconds)}`).join(', ');
          return parts.join(' / ') + (top ? ` [${top}]` : '');
        },
      };
    };
    const cpuPerCall = async <T extends { rate: number }>(proxy: 'passthrough' | 'gateway' | undefined, run: () => Promise<T>) => {
      const meter = cpuMeter(proxy);
      const result = await meter.measure(run);
      return { ...result, cpu: meter.report() };
    };
    report.push('| load | path | p50 ms | p99 ms | calls/s | CPU µs per call |', '|---|---|---:|---:|---:|---|');
    for (const rate of RATES) {
      process.stderr.write(`bench: fixed rate ${rate}/s\n`);
      const d = await cpuPerCall(undefined, async () => { const r = await fixedRate(callDirect, rate, SECONDS); return { ...r, rate: r.achieved }; });
      const g = await cpuPerCall('gateway', async () => { const r = await fixedRate(callGateway, rate, SECONDS); return { ...r, rate: r.achieved }; });
      report.push(`| ${rate}/s | direct | ${f(d.p50)} | ${f(d.p99)} | ${d.achieved.toFixed(0)} | ${d.cpu} |`);
      report.push(`| ${rate}/s | gateway | ${f(g.p50)} | ${f(g.p99)} | ${g.achieved.toFixed(0)} | ${g.cpu} |`);
      report.push(`| ${rate}/s | **added** | **${f(g.p50 - d.p50)}** | **${f(g.p99 - d.p99)}** | |`);
    }
    const ratios: string[] = [];
    const breakdowns: string[] = [];
    for (const concurrency of CONCURRENCIES) {
      process.stderr.write(`bench: saturation, ${concurrency} in flight\n`);
      // Each path for SECONDS in all, in ROUNDS turns (direct, passthrough, gateway, again…):
      // the machine's speed drifts over a run, and every path gets its share of each stretch.
      const paths = { direct: cpuMeter(undefined), passthrough: cpuMeter('passthrough'), gateway: cpuMeter('gateway') };
      const totals = { direct: 0, passthrough: 0, gateway: 0 };
      const perRound: number[] = [];
      const satBefore = stageTotals(await (await fetch(metricsUrl)).text());
      for (let round = 0; round < ROUNDS; round++) {
        const d = await paths.direct.measure(async () => ({ rate: await saturation(callDirect, concurrency, SECONDS / ROUNDS) }));
        const p = await paths.passthrough.measure(async () => ({ rate: await saturation(callPassthrough, concurrency, SECONDS / ROUNDS) }));
        const g = await paths.gateway.measure(async () => ({ rate: await saturation(callGateway, concurrency, SECONDS / ROUNDS) }));
        totals.direct += d.rate / ROUNDS; totals.passthrough += p.rate / ROUNDS; totals.gateway += g.rate / ROUNDS;
        perRound.push(g.rate / d.rate);
      }
      breakdowns.push('', `${concurrency} in flight:`, ...stageBreakdown(satBefore, stageTotals(await (await fetch(metricsUrl)).text())));
      const dSat = { rate: totals.direct, cpu: paths.direct.report() };
      const pSat = { rate: totals.passthrough, cpu: paths.passthrough.report() };
      const gSat = { rate: totals.gateway, cpu: paths.gateway.report() };
      report.push(`| ${concurrency} in flight | direct | | | ${dSat.rate.toFixed(0)} | ${dSat.cpu} |`);
      report.push(`| ${concurrency} in flight | bare passthrough | | | ${pSat.rate.toFixed(0)} | ${pSat.cpu} |`);
      report.push(`| ${concurrency} in flight | gateway | | | ${gSat.rate.toFixed(0)} | ${gSat.cpu} |`);
      ratios.push(`${concurrency} in flight ${(gSat.rate / dSat.rate).toFixed(2)} (rounds ${perRound.map((r) => r.toFixed(2)).join(' ')}; bare passthrough ${(pSat.rate / dSat.rate).toFixed(2)})`);
    }

    console.log(`\nbench/mcp-overhead: tools/call github__get_me, ${POLICIES} policies on the agent, audit on`);
    console.log(`${SECONDS}s per measurement (at saturation in ${ROUNDS} turns per path, the paths alternating; sequential calls in blocks of 100 per path, the paths alternating); client, gateway process and upstream process share one 2-core machine over loopback\n`);
    console.log(report.join('\n'));
    console.log(breakdowns.join('\n').replaceAll('mean over the sequential phase', 'mean at saturation'));
    console.log(`\nsaturation ratio gateway/direct: ${ratios.join(', ')} (goal >= 0.6); goals: sequential ALLOW added p50 <= 0.5 ms and p99 <= 2 ms, ping added p50 <= 0.2 ms, DENY p50 <= 0.5 ms (added to the direct ping)`);
    await direct.close();
    await gateway.close();
    await proxied.close();
  } catch (err) {
    console.error(`bench failed; the product printed:\n${product.output()}`);
    throw err;
  } finally {
    await product.stop();
    await sandbox.stop();
    await passthrough.stop();
    await db.drop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
