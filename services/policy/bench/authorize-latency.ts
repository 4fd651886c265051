/**
 * Authorize latency at 100 policies, over real gRPC on loopback against real Postgres.
 * Not a test: prints figures. `npx tsx services/policy/bench/authorize-latency.ts`
 * (needs the machine's Postgres, as the integration tests do).
 *
 * Scenarios, each measured sequentially (one call in flight) after a warm-up:
 *   - bare gRPC: a server answering a constant verdict, same proto: the transport's share
 *   - realistic: 100 policies over 16 connectors (tool lists, tiers, listed members)
 *   - worst case: 100 policies that all name the tool being called
 * each once for a returning member (the outcome is remembered) and once with a new member
 * id on every call (Cedar evaluates every time), and the same calls to `evaluate()`
 * in-process, without gRPC.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import {
  bindServer, channelOptions, connectors, createMemoryBus, openDatabase, PolicyDecisionService, schema, TIERS,
  type AuthorizeRequest, type AuthorizeResponse,
} from '@portcullis/core';
import { createTestDatabase } from '@portcullis/core/testing';
import { createPolicyRepo } from '../src/store/policy-repo.ts';
import { evaluate } from '../src/engine/evaluate.ts';
import { preparePolicySet } from '../src/engine/prepared-set.ts';
import { startPolicyService } from '../src/policy-service.ts';

const CALLS = Number(process.env.CALLS ?? 20_000);
const WARMUP = Number(process.env.WARMUP ?? 20_000);
const MEMBER = { id: '11111111-1111-4111-8111-111111111111', role: 'member', status: 'approved', email: 'alice@example.com' };

type PolicyInsert = typeof schema.policies.$inferInsert;

/** 100 policies spread like a real agent's: every connector, tool lists, tiers, some for listed members. */
function realisticPolicies(agentId: string): PolicyInsert[] {
  return Array.from({ length: 100 }, (_, i) => {
    const connector = connectors[i % connectors.length]!;
    const start = (i * 3) % connector.tools.length;
    const tools = i % 4 === 3 ? [] : connector.tools.slice(start, start + 1 + (i % 5)).map((t) => t.name);
    const tiers = i % 4 === 3 ? [TIERS[i % 3]!] : [];
    return {
      agentId, policyKey: `p-${String(i).padStart(3, '0')}`, name: `Policy ${i}`, service: connector.key, effect: 'forbid',
      tools, tiers, principal: i % 2 === 0 ? { type: 'all_members' } : { type: 'members', ids: [`m-${i}`, `m-${i + 1}`, MEMBER.id] },
      conditions: {}, denyMessage: `Denied by rule ${i}`, enabled: true,
    };
  });
}

/** 100 policies that all name github/create_branch (the worst case for one call). */
function samePolicyTool(agentId: string): PolicyInsert[] {
  return Array.from({ length: 100 }, (_, i) => ({
    agentId, policyKey: `same-${String(i).padStart(3, '0')}`, name: `Same ${i}`, service: 'github', effect: 'forbid',
    tools: ['create_branch', 'get_me', 'list_branches'], tiers: [], principal: { type: 'members', ids: [`m-${i}`] },
    conditions: {}, denyMessage: null, enabled: true,
  }) satisfies PolicyInsert);
}

function percentiles(samples: number[]): { p50: number; p99: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  return { p50: sorted[Math.floor(sorted.length * 0.5)]!, p99: sorted[Math.floor(sorted.length * 0.99)]! };
}

async function timeAsync(fn: () => Promise<unknown>): Promise<{ p50: number; p99: number }> {
  for (let i = 0; i < WARMUP; i++) await fn();
  const samples: number[] = [];
  for (let i = 0; i < CALLS; i++) {
    const start = process.hrtime.bigint();
    await fn();
    samples.push(Number(process.hrtime.bigint() - start) / 1000);
  }
  return percentiles(samples);
}

function timeSync(fn: () => unknown): { p50: number; p99: number } {
  for (let i = 0; i < WARMUP; i++) fn();
  const samples: number[] = [];
  for (let i = 0; i < CALLS; i++) {
    const start = process.hrtime.bigint();
    fn();
    samples.push(Number(process.hrtime.bigint() - start) / 1000);
  }
  return percentiles(samples);
}

function authorizeWith(client: InstanceType<typeof PolicyDecisionService>) {
  return (request: AuthorizeRequest) => new Promise<AuthorizeResponse>((resolve, reject) => {
    client.Authorize!(request, (err: grpc.ServiceError | null, res: AuthorizeResponse) => (err ? reject(err) : resolve(res)));
  });
}

const print = (label: string, t: { p50: number; p99: number }, base?: { p50: number }) =>
  console.log(`${label.padEnd(62)} p50 ${t.p50.toFixed(1).padStart(7)} µs   p99 ${t.p99.toFixed(1).padStart(7)} µs${base ? `   ×${(t.p50 / base.p50).toFixed(2)} of bare gRPC` : ''}`);

async function main() {
  const testDb = await createTestDatabase('policy_bench');
  const dataDir = mkdtempSync(join(tmpdir(), 'pc-policy-bench-'));
  const database = await openDatabase({ DATABASE_URL: testDb.url, DATA_DIR: dataDir });
  const bus = createMemoryBus();
  try {
    const [realistic] = await database.db.insert(schema.agents).values({ name: 'realistic', policyVersion: 1 }).returning();
    const [worst] = await database.db.insert(schema.agents).values({ name: 'worst', policyVersion: 1 }).returning();
    await database.db.insert(schema.policies).values([...realisticPolicies(realistic!.id), ...samePolicyTool(worst!.id)]);

    const service = await startPolicyService({ GRPC_ADDRESS: '127.0.0.1:0' }, { db: database.db, bus });
    const client = new PolicyDecisionService(service.address, grpc.credentials.createInsecure(), channelOptions);
    const authorize = authorizeWith(client);

    // Bare gRPC: same proto, same process layout, a constant answer.
    const bare = new grpc.Server(channelOptions);
    const constant: AuthorizeResponse = {
      decision: 'ALLOW', reason: 'No forbid policy matched', matchedPolicyKeys: [], matchedPolicyNames: [], matchedPolicyIds: [], policyVersionIds: [],
      principal: 'Portcullis::Member::"x"', action: 'GithubMCP::Action::"create_branch"', resource: 'GithubMCP::Repository::"acme/api"', policyVersion: 1,
    };
    bare.addService(PolicyDecisionService.service, {
      Authorize: (_call: unknown, cb: grpc.sendUnaryData<AuthorizeResponse>) => cb(null, constant),
      Preview: (_call: unknown, cb: grpc.sendUnaryData<never>) => cb({ code: grpc.status.UNIMPLEMENTED }),
      Simulate: (_call: unknown, cb: grpc.sendUnaryData<never>) => cb({ code: grpc.status.UNIMPLEMENTED }),
    });
    const bareAddress = await bindServer(bare, '127.0.0.1:0');
    const bareClient = new PolicyDecisionService(bareAddress, grpc.credentials.createInsecure(), channelOptions);
    const bareAuthorize = authorizeWith(bareClient);

    const call = (agentId: string, tool: string, member = MEMBER): AuthorizeRequest => ({
      agentId, member, service: 'github', tool, toolArgsJson: '{"owner":"acme","repo":"api","branch":"x"}', sessionId: 's', policyVersion: 1, nowMs: 0,
    });
    const realisticDeny = call(realistic!.id, 'get_me');
    let realisticAllow = realisticDeny;
    for (const tool of connectors[0]!.tools) {
      const candidate = call(realistic!.id, tool.name);
      if ((await authorize(candidate)).decision === 'ALLOW') { realisticAllow = candidate; break; }
    }
    const worstAllow = call(worst!.id, 'create_branch');
    let fresh = 0;
    const newMember = (request: AuthorizeRequest): AuthorizeRequest => ({ ...request, member: { ...MEMBER, id: `new-member-${fresh++}` } });

    console.log(`Authorize, ${CALLS} sequential calls per line after ${WARMUP} warm-up calls; Node ${process.version}\n`);
    for (const [label, request] of [['realistic 100 policies, DENY', realisticDeny], ['realistic 100 policies, ALLOW', realisticAllow], ['worst case (100 name the tool), ALLOW', worstAllow]] as const) {
      const v = await authorize(request);
      console.log(`  ${label}: ${v.decision} ${JSON.stringify(v.reason)} matched=${v.matchedPolicyKeys.length}`);
    }
    console.log('');
    const bareT = await timeAsync(() => bareAuthorize(realisticAllow));
    print('bare gRPC (constant answer)', bareT);
    print('gRPC Authorize, realistic 100 policies, DENY', await timeAsync(() => authorize(realisticDeny)), bareT);
    print('gRPC Authorize, realistic 100 policies, ALLOW', await timeAsync(() => authorize(realisticAllow)), bareT);
    print('gRPC Authorize, worst case: 100 policies name the tool', await timeAsync(() => authorize(worstAllow)), bareT);
    print('gRPC Authorize, realistic, DENY, new member each call', await timeAsync(() => authorize(newMember(realisticDeny))), bareT);
    print('gRPC Authorize, realistic, ALLOW, new member each call', await timeAsync(() => authorize(newMember(realisticAllow))), bareT);
    print('gRPC Authorize, worst case, new member each call', await timeAsync(() => authorize(newMember(worstAllow))), bareT);

    const repo = createPolicyRepo(database.db);
    const realisticSet = preparePolicySet((await repo.loadAgentPolicies(realistic!.id))!, 'bench:realistic');
    const worstSet = preparePolicySet((await repo.loadAgentPolicies(worst!.id))!, 'bench:worst');
    const input = (request: AuthorizeRequest) => ({ agentId: request.agentId, member: request.member, service: request.service, tool: request.tool, args: JSON.parse(request.toolArgsJson) as Record<string, unknown>, nowMs: Date.now() });
    console.log('');
    print('in-process evaluate(), realistic, DENY', timeSync(() => evaluate(realisticSet, input(realisticDeny))));
    print('in-process evaluate(), realistic, ALLOW', timeSync(() => evaluate(realisticSet, input(realisticAllow))));
    print('in-process evaluate(), worst case', timeSync(() => evaluate(worstSet, input(worstAllow))));
    print('in-process evaluate(), realistic, DENY, new member each call', timeSync(() => evaluate(realisticSet, input(newMember(realisticDeny)))));
    print('in-process evaluate(), realistic, ALLOW, new member each call', timeSync(() => evaluate(realisticSet, input(newMember(realisticAllow)))));
    print('in-process evaluate(), worst case, new member each call', timeSync(() => evaluate(worstSet, input(newMember(worstAllow)))));
    const loadStart = process.hrtime.bigint();
    const loads = 50;
    for (let i = 0; i < loads; i++) preparePolicySet((await repo.loadAgentPolicies(realistic!.id))!, `bench:load:${i}`).release();
    console.log(`\ncold load (Postgres read + compile), realistic: ${(Number(process.hrtime.bigint() - loadStart) / 1e6 / loads).toFixed(2)} ms per load`);

    client.close();
    bareClient.close();
    bare.forceShutdown();
    realisticSet.release();
    worstSet.release();
    await service.close();
  } finally {
    await bus.close();
    await database.close();
    await testDb.drop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
