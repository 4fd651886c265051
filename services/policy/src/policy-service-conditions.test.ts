import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createMemoryBus, openDatabase, PolicyDecisionService, schema,
  type AuthorizeRequest, type AuthorizeResponse, type Bus, type DatabaseHandle,
} from '@portcullis/core';
import { createTestDatabase, type TestDatabase } from '@portcullis/core/testing';
import { DEFAULT_DENY_REASON } from './engine/evaluate.ts';
import { startPolicyService, type PolicyService } from './policy-service.ts';
import { createPolicyRepo } from './store/policy-repo.ts';

/**
 * Conditions and deny-by-default end to end inside the decision point: rows in real Postgres,
 * calls over real gRPC, the clock moved with `POLICY_CLOCK_OFFSET_MS`.
 */

type Client = InstanceType<typeof PolicyDecisionService>;

const HOUR = 3_600_000;
const MONDAY_1030_UTC = Date.UTC(2026, 0, 5, 10, 30);

describe('conditions over gRPC and Postgres', () => {
  let testDb: TestDatabase;
  let database: DatabaseHandle;
  let bus: Bus;
  const services: PolicyService[] = [];
  const clients: Client[] = [];
  const dataDir = mkdtempSync(join(tmpdir(), 'pc-policy-cond-'));
  let agentId: string;
  const member = { id: '11111111-1111-4111-8111-111111111112', role: 'member', status: 'approved', email: 'bob@example.com' };

  async function start(clockOffsetMs: number): Promise<Client> {
    const service = await startPolicyService({ GRPC_ADDRESS: '127.0.0.1:0', POLICY_CLOCK_OFFSET_MS: clockOffsetMs }, { db: database.db, bus });
    services.push(service);
    const client = new PolicyDecisionService(service.address, grpc.credentials.createInsecure());
    clients.push(client);
    return client;
  }

  const authorize = (client: Client, overrides: Partial<AuthorizeRequest> = {}) => new Promise<AuthorizeResponse>((resolve, reject) => {
    const request: Partial<AuthorizeRequest> = { agentId, member, service: 'github', tool: 'issue_write', toolArgsJson: '{"owner":"acme","repo":"api"}', sessionId: 'mcp-1', policyVersion: 1, nowMs: MONDAY_1030_UTC, ...overrides };
    (client.Authorize as (r: Partial<AuthorizeRequest>, cb: (err: grpc.ServiceError | null, res: AuthorizeResponse) => void) => void)(request, (err, res) => (err ? reject(err) : resolve(res)));
  });

  beforeAll(async () => {
    testDb = await createTestDatabase('policy_conditions');
    database = await openDatabase({ DATABASE_URL: testDb.url, DATA_DIR: dataDir });
    const [agent] = await database.db.insert(schema.agents).values({ name: 'Strict agent', policyVersion: 1, defaultDecision: 'deny' }).returning();
    agentId = agent!.id;
    await database.db.insert(schema.policies).values([
      {
        agentId, policyKey: 'office-hours-issues', name: 'Issue writes in office hours', service: 'github', effect: 'permit', tools: ['issue_write'], tiers: [],
        principal: { type: 'all_members' }, enabled: true,
        conditions: { timeWindow: { days: ['mon', 'tue', 'wed', 'thu', 'fri'], start: '09:00', end: '17:00', timeZone: 'Europe/Paris' } },
      },
      {
        agentId, policyKey: 'two-per-session', name: 'Two issue writes per session', service: 'github', effect: 'forbid', tools: ['issue_write'], tiers: [],
        principal: { type: 'all_members' }, enabled: true, denyMessage: 'Two issue writes per session', conditions: { sessionLimit: { maxCalls: 2 } },
      },
    ]);
    bus = createMemoryBus();
  });

  afterAll(async () => {
    for (const client of clients) client.close();
    for (const service of services) await service.close();
    await bus?.close();
    await database?.close();
    await testDb?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('reads the agent\'s default decision and the conditions from the store', async () => {
    const snapshot = await createPolicyRepo(database.db).loadAgentPolicies(agentId);
    expect(snapshot?.defaultDecision).toBe('deny');
    expect(snapshot?.policies.map((p) => Object.keys(p.conditions ?? {}))).toEqual([['timeWindow'], ['sessionLimit']]);
  });

  it('permits inside the window up to the session limit, then denies; a tool no permit names is denied by default', async () => {
    const client = await start(0);
    expect(await authorize(client)).toMatchObject({ decision: 'ALLOW', reason: 'Allowed by policy "Issue writes in office hours"' });
    expect((await authorize(client)).decision).toBe('ALLOW');
    expect(await authorize(client)).toMatchObject({ decision: 'DENY', reason: 'Two issue writes per session', matchedPolicyKeys: ['two-per-session'] });
    expect((await authorize(client, { sessionId: 'mcp-2' })).decision).toBe('ALLOW');
    expect((await authorize(client, { sessionId: '' })).decision).toBe('ALLOW');
    expect(await authorize(client, { tool: 'get_me', toolArgsJson: '' })).toMatchObject({ decision: 'DENY', reason: DEFAULT_DENY_REASON, matchedPolicyKeys: [] });
  });

  it('moves the evaluation instant by POLICY_CLOCK_OFFSET_MS, from now_ms and from its own clock', async () => {
    const evening = await start(8 * HOUR); // Monday 18:30 in Paris: outside the window
    expect(await authorize(evening, { sessionId: 'mcp-3' })).toMatchObject({ decision: 'DENY', reason: DEFAULT_DENY_REASON });
    const back = await start(-8 * HOUR); // 02:30 in Paris
    expect((await authorize(back, { sessionId: 'mcp-3', nowMs: MONDAY_1030_UTC + 8 * HOUR })).decision).toBe('ALLOW');
  });
});
