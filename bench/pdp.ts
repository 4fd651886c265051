/**
 * bench/pdp: the policy decision point's Authorize latency and throughput as an agent's set
 * grows. `npx tsx bench/pdp.ts` (needs the machine's Postgres, as the integration tests do).
 *
 * For 10, 100 and 1,000 forbid policies on one agent (a realistic mix: every connector, tool
 * lists, tiers, some for listed members), measures one call that no policy forbids (so Cedar
 * considers every policy naming the tool) and one that a policy forbids:
 *   - in-process: `evaluate()` on the prepared set, no gRPC;
 *   - over gRPC: the real policy service (Postgres-backed) on a loopback port, one unary
 *     `Authorize` call per decision;
 *   - over the stream: the same service through the gateway's own policy client, whose
 *     decisions share a few long-lived `AuthorizeStream` streams (decision 031);
 * each for a returning member (the outcome is remembered per member) and for a new member id
 * on every call (Cedar evaluates every time). p50/p99 of sequential calls, then decisions/s
 * with 64 calls in flight over gRPC and over the stream. Three floors are measured in the same run:
 * a one-byte TCP echo on loopback and a bare gRPC server answering a constant, unary and over the
 * stream. `BENCH_STREAMS` sets the client's stream count (default: the client's own). Not a test:
 * nothing asserts on time.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, connect, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import {
  bindServer, channelOptions, connectors, createMemoryBus, openDatabase, PolicyDecisionService, schema, TIERS,
  type AuthorizeRequest, type AuthorizeResponse, type AuthorizeStreamRequest, type AuthorizeStreamResponse, type MemberMsg,
} from '@portcullis/core';
import { createTestDatabase } from '@portcullis/core/testing';
import { startPolicyService } from '@portcullis/policy';
import { evaluate, type AuthorizeInput } from '../services/policy/src/engine/evaluate.ts';
import { preparePolicySet } from '../services/policy/src/engine/prepared-set.ts';
import { createPolicyRepo } from '../services/policy/src/store/policy-repo.ts';
import { createPolicyClient } from '../services/gateway/src/clients/policy-client.ts';

const SIZES = (process.env.BENCH_SIZES ?? '10,100,1000').split(',').map(Number);
const CALLS = Number(process.env.BENCH_CALLS ?? 5_000);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 2_000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 64);
const MEMBER: MemberMsg = { id: '11111111-1111-4111-8111-111111111111', role: 'member', status: 'approved', email: 'alice@example.com' };
const GOAL_P50_US = 200;
const STREAMS = process.env.BENCH_STREAMS ? { streams: Number(process.env.BENCH_STREAMS) } : {};

type PolicyInsert = typeof schema.policies.$inferInsert;

/** `count` forbids spread like a real agent's over every connector. */
function policiesFor(agentId: string, count: number): PolicyInsert[] {
  return Array.from({ length: count }, (_, i) => {
    const connector = connectors[i % connectors.length]!;
    const start = (i * 3) % connector.tools.length;
    const byTier = i % 4 === 3;
    return {
      agentId, policyKey: `p-${String(i).padStart(4, '0')}`, name: `Policy ${i}`, service: connector.key, effect: 'forbid',
      tools: byTier ? [] : connector.tools.slice(start, start + 1 + (i % 5)).map((t) => t.name),
      tiers: byTier ? [TIERS[i % 3]!] : [],
      // Alternate per connector round, so each connector has both kinds: a forbid for listed
      // members names tools without denying the benchmark's member.
      principal: Math.floor(i / connectors.length) % 2 === 0 ? { type: 'all_members' } : { type: 'members', ids: [`m-${i}`, `m-${i + 1}`] },
      conditions: {}, denyMessage: `Denied by rule ${i}`, enabled: true,
    };
  });
}

interface Timing { p50: number; p99: number }

function percentiles(samples: number[]): Timing {
  const sorted = [...samples].sort((a, b) => a - b);
  return { p50: sorted[Math.floor(sorted.length * 0.5)]!, p99: sorted[Math.floor(sorted.length * 0.99)]! };
}

function timeSync(fn: (i: number) => unknown): Timing {
  for (let i = 0; i < WARMUP; i++) fn(i);
  const samples: number[] = [];
  for (let i = 0; i < CALLS; i++) {
    const start = process.hrtime.bigint();
    fn(WARMUP + i);
    samples.push(Number(process.hrtime.bigint() - start) / 1000);
  }
  return percentiles(samples);
}

async function timeAsync(fn: (i: number) => Promise<unknown>): Promise<Timing> {
  for (let i = 0; i < WARMUP; i++) await fn(i);
  const samples: number[] = [];
  for (let i = 0; i < CALLS; i++) {
    const start = process.hrtime.bigint();
    await fn(WARMUP + i);
    samples.push(Number(process.hrtime.bigint() - start) / 1000);
  }
  return percentiles(samples);
}

/** Round trips of one byte over a loopback TCP socket: what the network stack itself costs here. */
async function rawTcpRoundTrip(): Promise<Timing> {
  const server = createServer((socket) => { socket.setNoDelay(true); socket.on('data', (d) => socket.write(d)); });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const socket = connect((server.address() as AddressInfo).port, '127.0.0.1');
  socket.setNoDelay(true);
  await new Promise((resolve) => socket.once('connect', resolve));
  try {
    return await timeAsync(() => new Promise((resolve) => { socket.once('data', resolve); socket.write('x'); }));
  } finally {
    socket.destroy();
    server.close();
  }
}

/** Decisions per second with `CONCURRENCY` calls in flight for `CALLS` calls. */
async function throughput(fn: (i: number) => Promise<unknown>): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next < CALLS) await fn(next++);
  }));
  return CALLS / ((performance.now() - started) / 1000);
}

/** The same per-call work as in-process `evaluate()` over a tight loop, as decisions/s. */
const rate = (perSecond: number) => Math.round(perSecond).toLocaleString('en-US');

function throughputSync(fn: (i: number) => unknown): number {
  const started = performance.now();
  for (let i = 0; i < CALLS; i++) fn(i);
  return CALLS / ((performance.now() - started) / 1000);
}

async function main() {
  const testDb = await createTestDatabase('pdp_bench');
  const dataDir = mkdtempSync(join(tmpdir(), 'pc-pdp-bench-'));
  const database = await openDatabase({ DATABASE_URL: testDb.url, DATA_DIR: dataDir });
  const bus = createMemoryBus();
  const service = await startPolicyService({ GRPC_ADDRESS: '127.0.0.1:0' }, { db: database.db, bus });
  const client = new PolicyDecisionService(service.address, grpc.credentials.createInsecure(), channelOptions);
  const authorize = (request: AuthorizeRequest) => new Promise<AuthorizeResponse>((resolve, reject) => {
    client.Authorize!(request, (err: grpc.ServiceError | null, res: AuthorizeResponse) => (err ? reject(err) : resolve(res)));
  });
  // The transport's own share: a server on the same proto answering a constant verdict.
  // The gateway's client: verdicts over long-lived streams (its deadline far beyond any figure here).
  const streamed = createPolicyClient(service.address, 60_000, STREAMS);
  const bare = new grpc.Server(channelOptions);
  const unimplemented = (_call: unknown, cb: grpc.sendUnaryData<never>) => cb({ code: grpc.status.UNIMPLEMENTED });
  const constant = { decision: 'ALLOW', reason: 'No forbid policy matched' } as AuthorizeResponse;
  bare.addService(PolicyDecisionService.service, {
    Authorize: (_call: unknown, cb: grpc.sendUnaryData<Partial<AuthorizeResponse>>) => cb(null, constant),
    AuthorizeStream: (call: grpc.ServerDuplexStream<AuthorizeStreamRequest, AuthorizeStreamResponse>) => {
      call.on('data', (m: AuthorizeStreamRequest) => call.write({ id: m.id, response: constant }));
      call.on('end', () => call.end());
    },
    Preview: unimplemented, Simulate: unimplemented,
  });
  const bareAddress = await bindServer(bare, '127.0.0.1:0');
  const bareClient = new PolicyDecisionService(bareAddress, grpc.credentials.createInsecure(), channelOptions);
  const bareStreamed = createPolicyClient(bareAddress, 60_000, STREAMS);
  const repo = createPolicyRepo(database.db);
  const rows: string[][] = [];
  console.log(`PDP Authorize: ${CALLS} sequential calls per figure after ${WARMUP} warm-up calls; ${CONCURRENCY} in flight for decisions/s; Node ${process.version}\n`);
  try {
    const rawT = await rawTcpRoundTrip();
    console.log(`  raw TCP echo (one byte, loopback): p50 ${rawT.p50.toFixed(1)} µs, p99 ${rawT.p99.toFixed(1)} µs`);
    rows.push(['—', 'raw TCP echo, one byte', '—', '', '', rawT.p50.toFixed(1), rawT.p99.toFixed(1), '', '', '', '', '', '', '', '']);
    const bareT = await timeAsync(() => new Promise((resolve, reject) => {
      bareClient.Authorize!({ agentId: 'x' }, (err: grpc.ServiceError | null, res: unknown) => (err ? reject(err) : resolve(res)));
    }));
    console.log(`  bare gRPC (constant answer, transport only): p50 ${bareT.p50.toFixed(1)} µs, p99 ${bareT.p99.toFixed(1)} µs`);
    const bareRate = await throughput(() => new Promise((resolve, reject) => {
      bareClient.Authorize!({ agentId: 'x' }, (err: grpc.ServiceError | null, res: unknown) => (err ? reject(err) : resolve(res)));
    }));
    const bareStreamT = await timeAsync(() => bareStreamed.authorize({ agentId: 'x' } as AuthorizeRequest));
    const bareStreamRate = await throughput(() => bareStreamed.authorize({ agentId: 'x' } as AuthorizeRequest));
    console.log(`  bare gRPC stream (constant answer, transport only): p50 ${bareStreamT.p50.toFixed(1)} µs, p99 ${bareStreamT.p99.toFixed(1)} µs`);
    rows.push([
      '—', 'bare gRPC, constant answer', '—', '', '', bareT.p50.toFixed(1), bareT.p99.toFixed(1), '', '', rate(bareRate), bareT.p50 <= GOAL_P50_US ? 'yes' : 'no',
      bareStreamT.p50.toFixed(1), bareStreamT.p99.toFixed(1), rate(bareStreamRate), bareStreamT.p50 <= GOAL_P50_US ? 'yes' : 'no',
    ]);
    for (const size of SIZES) {
      const [agent] = await database.db.insert(schema.agents).values({ name: `bench-${size}`, policyVersion: 1 }).returning();
      const agentId = agent!.id;
      for (let i = 0; i < size; i += 500) await database.db.insert(schema.policies).values(policiesFor(agentId, size).slice(i, i + 500));
      const set = preparePolicySet((await repo.loadAgentPolicies(agentId))!, `bench:pdp:${size}`);

      const request = (tool: string, member: MemberMsg = MEMBER): AuthorizeRequest => ({
        agentId, member, service: 'github', tool, toolArgsJson: '{"owner":"acme","repo":"api"}', sessionId: 's', policyVersion: 1, nowMs: 0,
      });
      const inputOf = (r: AuthorizeRequest): AuthorizeInput => ({ agentId, member: r.member, service: r.service, tool: r.tool, args: { owner: 'acme', repo: 'api' }, nowMs: Date.now() });
      // The call no policy forbids with the most policies naming its tool, and one a policy forbids.
      let allow: AuthorizeRequest | undefined, deny: AuthorizeRequest | undefined, considered = -1;
      const github = connectors.find((c) => c.key === 'github')!;
      for (const tool of github.tools) {
        const r = request(tool.name);
        const verdict = evaluate(set, inputOf(r));
        const naming = policiesFor(agentId, size).filter((p) => p.service === 'github' && ((p.tools as string[]).includes(tool.name) || (p.tiers as string[]).includes(tool.tier))).length;
        if (verdict.decision === 'DENY') deny ??= r;
        else if (naming > considered) { allow = r; considered = naming; }
      }
      const calls = [['ALLOW', allow!], ['DENY', deny ?? allow!]] as const;
      const fresh = (r: AuthorizeRequest, i: number): AuthorizeRequest => ({ ...r, member: { ...MEMBER, id: `m-new-${size}-${i}` } });

      for (const [label, r] of calls) {
        for (const memberMode of ['returning member', 'new member each call'] as const) {
          const pick = memberMode === 'returning member' ? () => r : (i: number) => fresh(r, i);
          const local = timeSync((i) => evaluate(set, inputOf(pick(i))));
          const remote = await timeAsync((i) => authorize(pick(i + 1_000_000)));
          const localRate = throughputSync((i) => evaluate(set, inputOf(pick(i + 2_000_000))));
          const remoteRate = await throughput((i) => authorize(pick(i + 3_000_000)));
          const stream = await timeAsync((i) => streamed.authorize(pick(i + 4_000_000)));
          const streamRate = await throughput((i) => streamed.authorize(pick(i + 5_000_000)));
          rows.push([
            String(size), `${label}${label === 'ALLOW' ? ` (${considered} name the tool)` : ''}`, memberMode,
            local.p50.toFixed(1), local.p99.toFixed(1), remote.p50.toFixed(1), remote.p99.toFixed(1),
            (remote.p50 / local.p50).toFixed(1), rate(localRate), rate(remoteRate), remote.p50 <= GOAL_P50_US ? 'yes' : 'no',
            stream.p50.toFixed(1), stream.p99.toFixed(1), rate(streamRate), stream.p50 <= GOAL_P50_US ? 'yes' : 'no',
          ]);
          console.log(`  ${size} policies, ${label}, ${memberMode}: in-process p50 ${local.p50.toFixed(1)} µs, gRPC p50 ${remote.p50.toFixed(1)} µs, stream p50 ${stream.p50.toFixed(1)} µs`);
        }
      }
      set.release();
    }
  } finally {
    bareStreamed.close();
    streamed.close();
    bareClient.close();
    bare.forceShutdown();
    client.close();
    await service.close();
    await bus.close();
    await database.close();
    await testDb.drop();
    rmSync(dataDir, { recursive: true, force: true });
  }

  const header = [
    'policies', 'call', 'member', 'in-proc p50 µs', 'in-proc p99 µs', 'unary p50 µs', 'unary p99 µs', 'unary ÷ in-proc (p50)', 'in-proc decisions/s',
    `unary decisions/s (${CONCURRENCY} in flight)`, `unary p50 ≤ ${GOAL_P50_US} µs`,
    'stream p50 µs', 'stream p99 µs', `stream decisions/s (${CONCURRENCY} in flight)`, `stream p50 ≤ ${GOAL_P50_US} µs`,
  ];
  console.log(`\n| ${header.join(' | ')} |\n|${header.map((_, i) => (i < 3 ? '---' : '---:')).join('|')}|`);
  for (const row of rows) console.log(`| ${row.join(' | ')} |`);
}

await main();
