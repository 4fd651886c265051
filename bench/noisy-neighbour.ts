/**
 * bench/noisy-neighbour: does one tenant's load take another tenant's capacity? (issue 29, part 3)
 *
 * Starts the single-process product (as `npm start` runs it, on the machine's Postgres) with the
 * sandbox upstreams in a process of their own, and two tenants: A (the demo agent and its owner)
 * and B (another user's agent). Both get BENCH_NOISY_SEED audited calls first, so their audit
 * queries, exports and simulations read real data.
 *
 * Tenant A's probe runs the whole time, one request at a time on each line: `tools/call
 * github__get_me`, `GET /api/status` and A's audit query (`GET /api/audit` of its agent). It is
 * measured idle for BENCH_NOISY_IDLE_SECONDS (15), then for BENCH_NOISY_SECONDS (60) while B runs 16
 * clients that ignore every Retry-After: 8 on `/mcp` (tools/call in a loop) and 8 on the API
 * (audit queries, CSV and NDJSON exports, simulate and the overview, in turn). Prints A's p50 and
 * p99 idle and during, their ratios beside the targets, and B's accepted and refused counts.
 * Not a test: nothing asserts on time. BENCH_PRODUCT_ENV=A=1,B=2 sets the product's settings.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { connectors, isolatingFetch, openDatabase } from '@portcullis/core';
import { createTestDatabase } from '@portcullis/core/testing';
import { freePort, startTs } from '../test/support/processes.ts';
import { addMember, sandboxTokenIssuer } from '../test/support/fixtures.ts';
import { apiClient, signInThroughOutbox, type ApiClient } from '../test/support/api-client.ts';

const IDLE_SECONDS = Number(process.env.BENCH_NOISY_IDLE_SECONDS ?? 15);
const SECONDS = Number(process.env.BENCH_NOISY_SECONDS ?? 60);
const SEED = Number(process.env.BENCH_NOISY_SEED ?? 3_000);
/** Pause between two requests of one of A's probe lines, ms: A is a steady, modest tenant. */
const PROBE_GAP_MS = 20;

async function connect(url: string, token: string) {
  const client = new Client({ name: 'bench-noisy', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: isolatingFetch, requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return client;
}

function percentile(sorted: number[], p: number) {
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** `BENCH_PRODUCT_ENV=A=1,B=2`: settings for the product under test. */
function productEnv(): Record<string, string> {
  return Object.fromEntries((process.env.BENCH_PRODUCT_ENV ?? '').split(',').filter(Boolean).map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]));
}

type ProbeName = 'tools/call' | '/api/status' | 'audit query';

/** A's probe: each line one request at a time, latencies in ms, until `stop()`. */
function probeA(lines: Record<ProbeName, () => Promise<void>>) {
  const latencies = Object.fromEntries(Object.keys(lines).map((name) => [name, [] as number[]])) as Record<ProbeName, number[]>;
  const errors = Object.fromEntries(Object.keys(lines).map((name) => [name, 0])) as Record<ProbeName, number>;
  let running = true;
  const done = Promise.all((Object.keys(lines) as ProbeName[]).map(async (name) => {
    while (running) {
      const t0 = performance.now();
      try {
        await lines[name]();
        latencies[name].push(performance.now() - t0);
      } catch {
        errors[name] += 1;
      }
      await new Promise((r) => setTimeout(r, PROBE_GAP_MS));
    }
  }));
  return {
    async stop() {
      running = false;
      await done;
      return Object.fromEntries((Object.keys(lines) as ProbeName[]).map((name) => {
        const sorted = latencies[name].sort((a, b) => a - b);
        return [name, { p50: percentile(sorted, 50), p99: percentile(sorted, 99), n: sorted.length, errors: errors[name] }];
      })) as Record<ProbeName, { p50: number; p99: number; n: number; errors: number }>;
    },
  };
}

/** B's load: what each kind of request got back, by HTTP status class. */
interface Tally { accepted: number; refused: number; failed: number }
const tally = (): Tally => ({ accepted: 0, refused: 0, failed: 0 });

async function main() {
  const db = await createTestDatabase('bench_noisy');
  const dataDir = mkdtempSync(join(tmpdir(), 'pc-bench-noisy-'));
  const outbox = join(dataDir, 'outbox');
  const [port, sandboxPort] = await Promise.all([freePort(), freePort()]);
  const secret = randomBytes(32).toString('base64url');
  const sandbox = startTs('services/sandbox/src/main.ts', { SANDBOX_PORT: String(sandboxPort), PORTCULLIS_SECRET: secret, LOG_LEVEL: 'warn', DATA_DIR: dataDir }, 'sandbox');
  await sandbox.waitFor(/sandbox listening/);
  const sandboxUrl = `http://127.0.0.1:${sandboxPort}`;
  const base = `http://127.0.0.1:${port}`;
  const product = startTs('services/standalone/src/main.ts', {
    PORT: String(port), DATA_DIR: dataDir, DATABASE_URL: db.url, LOG_LEVEL: 'warn', MAIL_URL: `file://${outbox}`, PORTCULLIS_SECRET: secret,
    PUBLIC_URL: base,
    ...Object.fromEntries(connectors.map((c) => [`UPSTREAM_${c.key.toUpperCase()}_URL`, `${sandboxUrl}/${c.key}/mcp`])),
    ...productEnv(),
  }, 'standalone', process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : []);
  const clients: Client[] = [];
  try {
    const [, memberKeyA] = await product.waitFor(/Member key\s+(pcm_[A-Za-z0-9_-]{43})/, 120_000);

    // Tenant A: the demo agent and its owner, signed in to the API.
    const ownerA = apiClient(base);
    await signInThroughOutbox(ownerA, outbox, 'demo@portcullis.local');
    const agentsA = await ownerA.call('GET', '/api/agents');
    const agentA = (agentsA.body.agents ?? agentsA.body).find((a: { name: string }) => a.name)!.id as string;

    // Tenant B: another user, their own agent, a member key connected to the sandbox GitHub.
    const ownerB = apiClient(base);
    await signInThroughOutbox(ownerB, outbox, 'tenant-b@example.com');
    const agentB = (await ownerB.call('POST', '/api/agents', { name: 'Tenant B' })).body.id as string;
    await ownerB.call('PUT', `/api/agents/${agentB}/services`, { services: ['github'] });
    const token = await sandboxTokenIssuer(sandboxUrl)('github', { login: 'tenant-b', name: 'Tenant B' });
    const handle = await openDatabase({ DATABASE_URL: db.url, DATA_DIR: dataDir });
    const { memberKey: memberKeyB } = await addMember(handle.db, { agentId: agentB, email: 'tenant-b-agent@example.com', status: 'approved', connect: { github: token } });
    // Seeding members: four keys per tenant, each within the default per-key rate, as a team's agents would call.
    const seedKeys = async (agentId: string, tenant: string) => Promise.all(Array.from({ length: 4 }, async (_, i) => (await addMember(handle.db, {
      agentId, email: `seed-${tenant}-${i}@example.com`, status: 'approved', connect: { github: await sandboxTokenIssuer(sandboxUrl)('github', { login: `seed-${tenant}-${i}`, name: 'Seed' }) },
    })).memberKey));
    const seeders = [...await seedKeys(agentA, 'a'), ...await seedKeys(agentB, 'b')];
    await handle.close();

    const mcpA = await connect(`${base}/mcp`, memberKeyA!);
    clients.push(mcpA);
    process.stderr.write(`bench: seeding ${SEED} audited calls per tenant\n`);
    await Promise.all(seeders.map(async (key) => {
      const c = await connect(`${base}/mcp`, key);
      clients.push(c);
      for (let i = 0; i < SEED / 4; i++) {
        const t0 = performance.now();
        await c.callTool({ name: 'github__get_me', arguments: {} });
        // 40 calls a second per key at most: below the default quota, as a busy agent would be.
        await new Promise((r) => setTimeout(r, Math.max(0, 25 - (performance.now() - t0))));
      }
    }));
    await new Promise((r) => setTimeout(r, 3_000)); // the audit writer's last batches

    const expectOk = (res: { status: number; text: string }, what: string) => {
      if (res.status !== 200) throw new Error(`${what} answered ${res.status}: ${res.text.slice(0, 200)}`);
    };
    const lines: Record<ProbeName, () => Promise<void>> = {
      'tools/call': async () => {
        const r = await mcpA.callTool({ name: 'github__get_me', arguments: {} });
        if (r.isError) throw new Error('A was refused a call');
      },
      '/api/status': async () => expectOk(await ownerA.call('GET', '/api/status'), '/api/status'),
      'audit query': async () => expectOk(await ownerA.call('GET', `/api/audit?agentId=${agentA}&limit=50`), 'audit query'),
    };

    process.stderr.write(`bench: tenant A alone, ${IDLE_SECONDS}s\n`);
    let probe = probeA(lines);
    await new Promise((r) => setTimeout(r, IDLE_SECONDS * 1000));
    const idle = await probe.stop();

    process.stderr.write(`bench: tenant B's 16 clients beside A, ${SECONDS}s\n`);
    const mcpB = await Promise.all(Array.from({ length: 8 }, () => connect(`${base}/mcp`, memberKeyB)));
    clients.push(...mcpB);
    // Eight clients on B's one session (sign-in codes are limited per address), as eight tabs would be.
    const apiB: ApiClient[] = Array.from({ length: 8 }, () => ownerB);
    const draft = { name: 'Noisy draft', service: 'github', effect: 'forbid', tools: ['get_me'], principal: { type: 'all_members' } };
    const apiKinds: Array<[string, (c: ApiClient) => Promise<{ status: number }>]> = [
      ['audit query', (c) => c.call('GET', `/api/audit?agentId=${agentB}&limit=500`)],
      ['CSV export', (c) => c.call('GET', `/api/audit/export?agentId=${agentB}&format=csv&exportAll=true`)],
      ['audit query (tool)', (c) => c.call('GET', `/api/audit?agentId=${agentB}&tool=github__get_me&limit=500`)],
      ['NDJSON export', (c) => c.call('GET', `/api/audit/export?agentId=${agentB}&format=ndjson&exportAll=true`)],
      ['simulate', (c) => c.call('POST', `/api/agents/${agentB}/policies/simulate`, { draft, limit: 10_000 })],
      ['overview', (c) => c.call('GET', '/api/dashboard/overview')],
    ];
    const bTally: Record<string, Tally> = { 'tools/call': tally(), ...Object.fromEntries(apiKinds.map(([name]) => [name, tally()])) };
    const count = (name: string, status: number) => {
      const t = bTally[name]!;
      if (status >= 200 && status < 300) t.accepted += 1;
      else if (status === 429 || status === 503) t.refused += 1;
      else t.failed += 1;
    };
    let loading = true;
    probe = probeA(lines);
    const load = Promise.all([
      ...mcpB.map(async (c) => {
        while (loading) {
          try {
            const r = await c.callTool({ name: 'github__get_me', arguments: {} });
            count('tools/call', r.isError ? 500 : 200);
          } catch (err) {
            // A refusal: the SDK throws on an HTTP 429 or a JSON-RPC error; an abuser tries again at once.
            count('tools/call', /429|rate|Too many/i.test(String(err)) ? 429 : 500);
          }
        }
      }),
      ...apiB.map(async (c, i) => {
        for (let turn = i; loading; turn++) {
          const [name, send] = apiKinds[turn % apiKinds.length]!;
          try { count(name, (await send(c)).status); } catch { count(name, 599); }
        }
      }),
    ]);
    await new Promise((r) => setTimeout(r, SECONDS * 1000));
    const during = await probe.stop();
    loading = false;
    await load;

    const f = (n: number) => n.toFixed(2);
    const targets: Record<ProbeName, { p50?: number; p99?: number }> = { 'tools/call': { p50: 1.5, p99: 3 }, '/api/status': { p99: 3 }, 'audit query': { p50: 2 } };
    console.log(`\nbench/noisy-neighbour: single process, ${IDLE_SECONDS}s tenant A alone, then ${SECONDS}s beside tenant B's 16 clients (8 /mcp, 8 API; Retry-After ignored); ${SEED} seeded calls per tenant`);
    console.log('\n| tenant A | idle p50 ms | idle p99 ms | during p50 ms | during p99 ms | p50 ratio | p99 ratio | target | A\'s requests idle / during (errors) |');
    console.log('|---|---:|---:|---:|---:|---:|---:|---|---|');
    for (const name of Object.keys(lines) as ProbeName[]) {
      const i = idle[name];
      const d = during[name];
      const t = targets[name];
      const goal = [t.p50 ? `p50 ≤ ${t.p50}×` : '', t.p99 ? `p99 ≤ ${t.p99}×` : ''].filter(Boolean).join(', ');
      const met = (!t.p50 || d.p50 / i.p50 <= t.p50) && (!t.p99 || d.p99 / i.p99 <= t.p99);
      console.log(`| ${name} | ${f(i.p50)} | ${f(i.p99)} | ${f(d.p50)} | ${f(d.p99)} | **${f(d.p50 / i.p50)}** | **${f(d.p99 / i.p99)}** | ${goal} ${met ? 'met' : 'MISSED'} | ${i.n} / ${d.n} (${i.errors + d.errors}) |`);
    }
    console.log('\n| tenant B | accepted | refused (429) | failed |\n|---|---:|---:|---:|');
    for (const [name, t] of Object.entries(bTally)) console.log(`| ${name} | ${t.accepted} | ${t.refused} | ${t.failed} |`);
  } catch (err) {
    console.error(`bench failed; the product printed:\n${product.output()}`);
    throw err;
  } finally {
    await Promise.allSettled(clients.map((c) => c.close()));
    await product.stop();
    await sandbox.stop();
    await db.drop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
process.exit(0);
