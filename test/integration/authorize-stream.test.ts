import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bindServer, channelOptions, createMemoryBus, NO_FORBID_MATCHED, openDatabase, PolicyDecisionService, schema,
  type AuthorizeRequest, type AuthorizeResponse, type Bus, type Database, type DatabaseHandle,
} from '@portcullis/core';
import { createTestDatabase, deleteTestStreams, TEST_NATS_URL, uniqueSubjectPrefix, type TestDatabase } from '@portcullis/core/testing';
import { compilePolicyText, startPolicyService, type PolicyRecordInput, type PolicyService } from '@portcullis/policy';
import { createPolicyClient, type PolicyClient } from '../../services/gateway/src/clients/policy-client.ts';
import { freePort, startTs, type RunningProcess } from '../support/processes.ts';

/**
 * The gateway's policy client asks for verdicts over long-lived `AuthorizeStream` streams
 * (decision 031), against the real decision point: in-process for most tests, as a process of
 * its own where it is stopped or killed.
 */
const member = { id: '11111111-1111-4111-8111-111111111111', role: 'member', status: 'approved', email: 'alice@example.com' };

/** An agent whose one policy forbids GitHub's destructive tools with `denyMessage`. */
async function seedAgent(db: Database, name: string, denyMessage: string): Promise<string> {
  const record: PolicyRecordInput = {
    policyKey: 'no-destructive-github', name: 'No destructive GitHub', service: 'github', effect: 'forbid',
    tools: [], tiers: ['destructive'], principal: { type: 'all_members' }, denyMessage, enabled: true,
  };
  const [agent] = await db.insert(schema.agents).values({ name, policyVersion: 1 }).returning();
  const [policy] = await db.insert(schema.policies).values({ agentId: agent!.id, ...record, conditions: {} }).returning();
  const [version] = await db.insert(schema.policyVersions).values({
    agentId: agent!.id, policyId: policy!.id, version: 1, change: 'create', snapshot: { ...record }, cedar: compilePolicyText(record),
  }).returning();
  await db.update(schema.policies).set({ currentVersionId: version!.id }).where(eq(schema.policies.id, policy!.id));
  return agent!.id;
}

const request = (agentId: string, tool: string, overrides: Partial<AuthorizeRequest> = {}): AuthorizeRequest => ({
  agentId, member, service: 'github', tool, toolArgsJson: '{"owner":"acme","repo":"api"}', sessionId: '', policyVersion: 1, nowMs: 0, ...overrides,
});

/** The settled outcome of a call: its verdict, or the gRPC code it rejected with. */
async function outcome(call: Promise<AuthorizeResponse>): Promise<AuthorizeResponse | { code: number }> {
  try {
    return await call;
  } catch (err) {
    return { code: (err as grpc.ServiceError).code };
  }
}

/** gRPC calls the process has started on its channel to `address` (grpc-js channelz). */
function callsStartedTo(address: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const handlers = grpc.getChannelzHandlers();
    const call = { request: { start_channel_id: 0, max_results: 1_000 } } as unknown as Parameters<typeof handlers.GetTopChannels>[0];
    handlers.GetTopChannels(call, (err, value) => {
      if (err || !value) return reject(err);
      const channels = (value.channel ?? []).filter((c) => String(c.data?.target).endsWith(address));
      resolve(channels.reduce((sum, c) => sum + Number(c.data?.calls_started ?? 0), 0));
    });
  });
}

describe('policy client over AuthorizeStream, against the real decision point', () => {
  let testDb: TestDatabase;
  let database: DatabaseHandle;
  let bus: Bus;
  let service: PolicyService;
  const dataDir = mkdtempSync(join(tmpdir(), 'pc-authz-stream-'));
  let alpha: string;
  let beta: string;

  beforeAll(async () => {
    testDb = await createTestDatabase('authz_stream');
    database = await openDatabase({ DATABASE_URL: testDb.url, DATA_DIR: dataDir });
    alpha = await seedAgent(database.db, 'Alpha', 'alpha: destructive tools are blocked');
    beta = await seedAgent(database.db, 'Beta', 'beta: destructive tools are blocked');
    bus = createMemoryBus();
    service = await startPolicyService({ GRPC_ADDRESS: '127.0.0.1:0' }, { db: database.db, bus });
  });

  afterAll(async () => {
    await service?.close();
    await bus?.close();
    await database?.close();
    await testDb?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('answers 1,000 concurrent calls, each with its own verdict, over a few long-lived streams', async () => {
    const policy = createPolicyClient(service.address, 30_000, { maxStreamAgeMs: 600_000 });
    try {
      const calls = Array.from({ length: 1_000 }, (_, i) => {
        const agentId = i % 2 === 0 ? alpha : beta;
        const tool = i % 3 === 0 ? 'delete_repository' : 'list_commits';
        // Every 7th is malformed: it alone fails, the others on its stream go on.
        return { agentId, tool, malformed: i % 7 === 0, result: outcome(policy.authorize(request(agentId, tool, i % 7 === 0 ? { service: '' } : {}))) };
      });
      for (const call of calls) {
        const result = await call.result;
        if (call.malformed) expect(result).toEqual({ code: grpc.status.INVALID_ARGUMENT });
        else if (call.tool === 'delete_repository') {
          expect(result).toMatchObject({ decision: 'DENY', reason: `${call.agentId === alpha ? 'alpha' : 'beta'}: destructive tools are blocked` });
        } else {
          expect(result).toMatchObject({ decision: 'ALLOW', reason: NO_FORBID_MATCHED, action: 'GithubMCP::Action::"list_commits"' });
        }
      }
      // No HTTP/2 stream per call: a handful of streams carried them all.
      expect(await callsStartedTo(service.address)).toBeLessThanOrEqual(4);
    } finally {
      policy.close();
    }
  });

  it('spreads its streams over every decision point the address names (round robin)', async () => {
    // A second replica on its own database: it does not know the agent, so its verdicts show who answered.
    const otherDb = await createTestDatabase('authz_stream_other');
    const otherData = mkdtempSync(join(tmpdir(), 'pc-authz-stream-other-'));
    const other = await openDatabase({ DATABASE_URL: otherDb.url, DATA_DIR: otherData });
    const otherBus = createMemoryBus();
    const replica = await startPolicyService({ GRPC_ADDRESS: '127.0.0.1:0' }, { db: other.db, bus: otherBus });
    const policy = createPolicyClient(`ipv4:${service.address},${replica.address}`, 30_000, { streams: 2, maxStreamAgeMs: 50 });
    try {
      const reasons = new Set<string>();
      for (let i = 0; i < 400 && reasons.size < 2; i++) {
        reasons.add((await policy.authorize(request(alpha, 'list_commits'))).reason);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      expect([...reasons].sort()).toEqual(['Denied: unknown agent', NO_FORBID_MATCHED]);
    } finally {
      policy.close();
      await replica.close();
      await otherBus.close();
      await other.close();
      await otherDb.drop();
      rmSync(otherData, { recursive: true, force: true });
    }
  });

  it('a decision point shutting down with calls in flight: each call still gets its verdict, from it or from the replica left', async () => {
    const leaving = await startPolicyService({ GRPC_ADDRESS: '127.0.0.1:0' }, { db: database.db, bus });
    const policy = createPolicyClient(`ipv4:${leaving.address},${service.address}`, 30_000, { streams: 2 });
    try {
      await policy.authorize(request(alpha, 'list_commits'));
      let closing: Promise<void> | undefined;
      const results = await Promise.all(Array.from({ length: 2_000 }, async (_, i) => {
        if (i === 500) closing = leaving.close();
        if (i % 50 === 0) await new Promise((resolve) => setTimeout(resolve, 1));
        return outcome(policy.authorize(request(beta, 'delete_repository')));
      }));
      await closing;
      for (const result of results) expect(result).toMatchObject({ decision: 'DENY', reason: 'beta: destructive tools are blocked' });
    } finally {
      policy.close();
      await leaving.close();
    }
  });

  it('asks a decision point without AuthorizeStream (an older release) with unary Authorize', async () => {
    // Unary only, forwarding to the real decision point.
    const real = new PolicyDecisionService(service.address, grpc.credentials.createInsecure(), channelOptions);
    const older = new grpc.Server(channelOptions);
    older.addService(PolicyDecisionService.service, {
      Authorize: (call: grpc.ServerUnaryCall<AuthorizeRequest, AuthorizeResponse>, callback: grpc.sendUnaryData<AuthorizeResponse>) => {
        real.Authorize!(call.request, callback);
      },
    });
    const policy = createPolicyClient(await bindServer(older, '127.0.0.1:0'), 30_000);
    try {
      expect(await policy.authorize(request(alpha, 'delete_repository'))).toMatchObject({ decision: 'DENY', reason: 'alpha: destructive tools are blocked' });
      expect(await policy.authorize(request(beta, 'list_commits'))).toMatchObject({ decision: 'ALLOW' });
    } finally {
      policy.close();
      older.forceShutdown();
      real.close();
    }
  });

  describe('a decision point of its own process', () => {
    const prefix = uniqueSubjectPrefix('authzstream');
    let port: number;
    let pdp: RunningProcess;
    const env = () => ({
      NODE_ENV: 'development', LOG_LEVEL: 'warn', PORTCULLIS_SECRET: randomBytes(32).toString('base64url'),
      DATABASE_URL: testDb.url, NATS_URL: TEST_NATS_URL, NATS_SUBJECT_PREFIX: prefix, GRPC_ADDRESS: `127.0.0.1:${port}`, DATA_DIR: join(dataDir, 'pdp'),
    });
    const startPdp = async () => {
      pdp = startTs('services/policy/src/main.ts', env(), 'policy');
      await pdp.waitFor(/policy listening/);
    };

    beforeAll(async () => {
      port = await freePort();
      await startPdp();
    });
    afterAll(async () => {
      pdp?.child.kill('SIGCONT');
      await pdp?.stop('SIGKILL');
      await deleteTestStreams(TEST_NATS_URL, prefix).catch(() => undefined);
    });

    it('rejects a call past POLICY_TIMEOUT_MS; once the decision point answers again, so do calls', async () => {
      const policy: PolicyClient = createPolicyClient(`127.0.0.1:${port}`, 500);
      try {
        expect(await policy.authorize(request(alpha, 'list_commits'))).toMatchObject({ decision: 'ALLOW' });
        pdp.child.kill('SIGSTOP');
        expect(await outcome(policy.authorize(request(alpha, 'list_commits')))).toEqual({ code: grpc.status.DEADLINE_EXCEEDED });
        pdp.child.kill('SIGCONT');
        expect(await policy.authorize(request(beta, 'delete_repository'))).toMatchObject({ decision: 'DENY', reason: 'beta: destructive tools are blocked' });
      } finally {
        policy.close();
      }
    });

    it('killed with calls in flight: they reject as unavailable at once (not at the deadline); after its restart calls succeed', async () => {
      // A deadline far beyond the test's own timeout: a call left hanging would fail the test.
      const policy: PolicyClient = createPolicyClient(`127.0.0.1:${port}`, 600_000);
      try {
        expect(await policy.authorize(request(alpha, 'list_commits'))).toMatchObject({ decision: 'ALLOW' });
        pdp.child.kill('SIGSTOP'); // the calls below reach its socket and stay unanswered
        const inFlight = Array.from({ length: 20 }, (_, i) => outcome(policy.authorize(request(i % 2 ? alpha : beta, 'list_commits'))));
        await new Promise((resolve) => setTimeout(resolve, 100));
        await pdp.stop('SIGKILL');
        for (const result of await Promise.all(inFlight)) expect(result).toEqual({ code: grpc.status.UNAVAILABLE });

        // While it is down, calls fail as unavailable too, never with a verdict.
        expect(await outcome(policy.authorize(request(alpha, 'list_commits')))).toEqual({ code: grpc.status.UNAVAILABLE });

        await startPdp();
        let result = await outcome(policy.authorize(request(beta, 'delete_repository')));
        for (let i = 0; i < 100 && 'code' in result; i++) {
          expect(result).toEqual({ code: grpc.status.UNAVAILABLE });
          await new Promise((resolve) => setTimeout(resolve, 100));
          result = await outcome(policy.authorize(request(beta, 'delete_repository')));
        }
        expect(result).toMatchObject({ decision: 'DENY', reason: 'beta: destructive tools are blocked' });
      } finally {
        policy.close();
      }
    });
  });
});
