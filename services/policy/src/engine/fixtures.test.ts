import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { evaluate } from './evaluate.ts';
import { preparePolicySet } from './prepared-set.ts';
import { createInMemorySessionCounters } from './session-counters.ts';
import { compilePolicy, type StoredPolicyRecord } from './compile.ts';

/**
 * Policy fixtures as data: `fixtures/<scenario>/records.json` holds the agent's policy
 * records (defaults filled below), optional `agent.json` the agent's settings
 * (`defaultDecision`), `ALLOW/*.json` and `DENY/*.json` one call each with the verdict its
 * folder names and, optionally, the exact reason and matched policy keys. A call may list
 * `history`: calls made first (fresh session counters per file), each with the verdict it must get.
 */

const root = fileURLToPath(new URL('./fixtures/', import.meta.url));
const AGENT_ID = '00000000-0000-4000-8000-000000000001';
const NOW = Date.UTC(2026, 0, 5, 10, 30); // a Monday, 10:30 UTC

const recordSchema = z.strictObject({
  policyKey: z.string(),
  name: z.string(),
  service: z.string(),
  effect: z.enum(['forbid', 'permit']),
  tools: z.array(z.string()).default([]),
  tiers: z.array(z.string()).default([]),
  principal: z.union([
    z.strictObject({ type: z.literal('all_members') }),
    z.strictObject({ type: z.literal('members'), ids: z.array(z.string()) }),
  ]).default({ type: 'all_members' }),
  denyMessage: z.string().nullable().default(null),
  enabled: z.boolean().default(true),
  conditions: z.record(z.string(), z.unknown()).default({}),
});

const agentSchema = z.strictObject({ defaultDecision: z.enum(['allow', 'deny']).default('allow') });

const memberSchema = z.strictObject({ id: z.string(), role: z.string(), status: z.string(), email: z.string() });
const DEFAULT_SESSION = 'session-1';
/** A call made before the one under test; unset fields are the test call's. */
const priorCallSchema = z.strictObject({
  tool: z.string().optional(),
  args: z.record(z.string(), z.unknown()).optional(),
  sessionId: z.string().optional(),
  nowMs: z.number().int().optional(),
  repeat: z.number().int().min(1).default(1),
  expect: z.enum(['ALLOW', 'DENY']),
});
const requestSchema = z.strictObject({
  description: z.string().min(1),
  member: memberSchema.default({ id: 'alice', role: 'member', status: 'approved', email: 'alice@example.com' }),
  service: z.string(),
  tool: z.string(),
  args: z.record(z.string(), z.unknown()).default({}),
  nowMs: z.number().int().default(NOW),
  /** The MCP session; "" = none. */
  sessionId: z.string().default(DEFAULT_SESSION),
  history: z.array(priorCallSchema).default([]),
  expect: z.strictObject({ reason: z.string().optional(), matchedPolicyKeys: z.array(z.string()).optional() }).default({}),
});

function readJson(path: string): unknown {
  return JSON.parse(readFileSync(path, 'utf8'));
}

function loadRecords(scenario: string): StoredPolicyRecord[] {
  const raw = z.array(recordSchema).parse(readJson(join(root, scenario, 'records.json')));
  return raw.map((r) => ({ ...r, id: `id-${r.policyKey}`, currentVersionId: `version-${r.policyKey}` }));
}

const scenarios = readdirSync(root, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name).sort();

describe('policy fixtures', () => {
  it('has scenarios, each with records and at least one request', () => {
    expect(scenarios.length).toBeGreaterThanOrEqual(8);
    for (const scenario of scenarios) {
      expect(existsSync(join(root, scenario, 'records.json')), scenario).toBe(true);
      const requests = (['ALLOW', 'DENY'] as const).flatMap((d) => (existsSync(join(root, scenario, d)) ? readdirSync(join(root, scenario, d)) : []));
      expect(requests.length, scenario).toBeGreaterThan(0);
    }
  });

  describe.each(scenarios)('%s', (scenario) => {
    const records = loadRecords(scenario);
    const agentFile = join(root, scenario, 'agent.json');
    const agent = agentSchema.parse(existsSync(agentFile) ? readJson(agentFile) : {});
    const set = preparePolicySet({ agentId: AGENT_ID, agentStatus: 'active', policyVersion: 1, policies: records, defaultDecision: agent.defaultDecision }, `fixture:${scenario}`);

    it('compiles; records with conditions also pass authoring (strict Cedar validation included)', () => {
      expect(set.failure).toBeUndefined();
      for (const record of records.filter((r) => Object.keys(r.conditions ?? {}).length > 0)) {
        expect(compilePolicy(record, { mode: 'authoring' }).errors, record.policyKey).toEqual([]);
      }
    });

    const cases = (['ALLOW', 'DENY'] as const).flatMap((decision) => {
      const dir = join(root, scenario, decision);
      if (!existsSync(dir)) return [];
      return readdirSync(dir).filter((f) => f.endsWith('.json')).sort().map((file) => ({ decision, file, request: requestSchema.parse(readJson(join(dir, file))) }));
    });

    it.each(cases)('$decision/$file', ({ decision, request }) => {
      const sessions = createInMemorySessionCounters();
      const base = { agentId: AGENT_ID, member: request.member, service: request.service, tool: request.tool, args: request.args, nowMs: request.nowMs, sessionId: request.sessionId };
      request.history.forEach((prior, index) => {
        for (let i = 0; i < prior.repeat; i++) {
          const before = evaluate(set, { ...base, tool: prior.tool ?? base.tool, args: prior.args ?? base.args, sessionId: prior.sessionId ?? base.sessionId, nowMs: prior.nowMs ?? base.nowMs }, { sessions });
          expect(before.decision, `history ${index}, call ${i + 1}: ${before.reason}`).toBe(prior.expect);
        }
      });
      const verdict = evaluate(set, base, { sessions });
      expect(verdict.decision, request.description).toBe(decision);
      if (request.expect.reason !== undefined) expect(verdict.reason, request.description).toBe(request.expect.reason);
      if (request.expect.matchedPolicyKeys !== undefined) expect(verdict.matchedPolicyKeys, request.description).toEqual(request.expect.matchedPolicyKeys);
      // Names follow keys one to one; database and version ids name the stored policies among them.
      expect(verdict.matchedPolicyNames).toHaveLength(verdict.matchedPolicyKeys.length);
      const stored = verdict.matchedPolicyKeys.filter((key) => !key.startsWith('portcullis.'));
      expect(verdict.matchedPolicyIds).toEqual(stored.map((key) => `id-${key}`));
      expect(verdict.policyVersionIds).toEqual(stored.map((key) => `version-${key}`));
      expect(verdict.policyVersion).toBe(1);
    });
  });
});
