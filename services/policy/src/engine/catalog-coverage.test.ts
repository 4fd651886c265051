import { connectors, TIERS } from '@portcullis/core';
import { describe, expect, it } from 'vitest';
import { validatePolicyStrict } from './cedar-schema.ts';
import { compilePolicy, type StoredPolicyRecord } from './compile.ts';
import { evaluate, type AuthorizeInput } from './evaluate.ts';
import { preparePolicySet } from './prepared-set.ts';

const AGENT_ID = '00000000-0000-4000-8000-0000000000c0';
const member = { id: 'm1', role: 'member', status: 'approved', email: 'm1@example.com' };
const allTools = connectors.flatMap((c) => c.tools.map((t) => ({ service: c.key, tool: t.name, tier: t.tier, params: Object.keys(t.params) })));

function record(policyKey: string, service: string, selection: { tools?: string[]; tiers?: string[] }): StoredPolicyRecord {
  return {
    id: `id-${policyKey}`, currentVersionId: null, enabled: true, policyKey, name: policyKey, service, effect: 'forbid',
    tools: selection.tools ?? [], tiers: selection.tiers ?? [], principal: { type: 'all_members' }, denyMessage: null,
  };
}

function call(service: string, tool: string): AuthorizeInput {
  return { agentId: AGENT_ID, member, service, tool, args: {}, nowMs: Date.now() };
}

describe('the whole catalog', () => {
  it('has the 281 tools of 16 connectors', () => {
    expect(connectors).toHaveLength(16);
    expect(allTools).toHaveLength(281);
  });

  it('compiles every tool in a policy that names it, and the policy validates in strict mode', () => {
    for (const { service, tool } of allTools) {
      const compiled = compilePolicy(record(`${service}.${tool}`, service, { tools: [tool] }), { mode: 'authoring' });
      expect(compiled.errors, `${service}/${tool}`).toEqual([]);
      expect(compiled.warnings, `${service}/${tool}`).toEqual([]);
      expect(compiled.cedar).toContain(`action == `);
      // Authoring validated it already; said again so this test cannot pass without Cedar's validator.
      expect(validatePolicyStrict(service, `${service}.${tool}`, compiled.cedar), `${service}/${tool}`).toEqual({ errors: [], warnings: [] });
    }
  });

  it('validates every tool in strict mode with every kind of condition (context, resources, arguments)', () => {
    for (const { service, tool, params } of allTools) {
      const args = params.length > 0
        ? [{ path: params[0]!, op: 'equals', value: 'x' }, { path: params[0]!, op: 'oneOf', values: ['x', 1, true] }, { path: params[0]!, op: 'prefix', value: 'x*' }, { path: params[0]!, op: 'regex', pattern: '^x' }]
        : undefined;
      const compiled = compilePolicy({
        ...record(`${service}.${tool}`, service, { tools: [tool] }),
        conditions: {
          timeWindow: { days: ['mon', 'sun'], start: '22:00', end: '06:00', timeZone: 'Europe/Paris' },
          sessionLimit: { maxCalls: 3 },
          resources: { match: 'not_in', ids: ['a', 'b/c'] },
          ...(args ? { args } : {}),
        },
      }, { mode: 'authoring' });
      expect(compiled.errors, `${service}/${tool}`).toEqual([]);
      expect(compiled.warnings, `${service}/${tool}`).toEqual([]);
    }
  });

  it('validates a tier policy for each tier of each connector in strict mode', () => {
    let checked = 0;
    for (const c of connectors) {
      for (const tier of TIERS.filter((t) => c.tools.some((tool) => tool.tier === t))) {
        const compiled = compilePolicy(record(`${c.key}.${tier}`, c.key, { tiers: [tier] }), { mode: 'authoring' });
        expect(compiled.errors, `${c.key}/${tier}`).toEqual([]);
        expect(compiled.warnings, `${c.key}/${tier}`).toEqual([]);
        expect(validatePolicyStrict(c.key, `${c.key}.${tier}`, compiled.cedar), `${c.key}/${tier}`).toEqual({ errors: [], warnings: [] });
        checked += 1;
      }
    }
    expect(checked).toBeGreaterThanOrEqual(40);
  });

  it('denies each tool by exactly the one policy naming it, in one set of 281 policies', () => {
    const set = preparePolicySet({
      agentId: AGENT_ID, agentStatus: 'active', policyVersion: 1,
      policies: allTools.map(({ service, tool }) => record(`${service}.${tool}`, service, { tools: [tool] })),
    }, 'catalog:per-tool');
    expect(set.failure).toBeUndefined();
    for (const { service, tool } of allTools) {
      const verdict = evaluate(set, call(service, tool));
      expect(verdict.decision, `${service}/${tool}`).toBe('DENY');
      expect(verdict.matchedPolicyKeys, `${service}/${tool}`).toEqual([`${service}.${tool}`]);
    }
  });

  it('denies each tool by exactly the tier policy of its service and tier', () => {
    const tierPolicies = connectors.flatMap((c) => TIERS.filter((tier) => c.tools.some((t) => t.tier === tier)).map((tier) => record(`${c.key}.${tier}`, c.key, { tiers: [tier] })));
    expect(tierPolicies.length).toBeGreaterThanOrEqual(40);
    const set = preparePolicySet({ agentId: AGENT_ID, agentStatus: 'active', policyVersion: 1, policies: tierPolicies }, 'catalog:per-tier');
    expect(set.failure).toBeUndefined();
    expect(set.warnings).toEqual([]);
    for (const { service, tool, tier } of allTools) {
      const verdict = evaluate(set, call(service, tool));
      expect(verdict.decision, `${service}/${tool}`).toBe('DENY');
      expect(verdict.matchedPolicyKeys, `${service}/${tool}`).toEqual([`${service}.${tier}`]);
    }
  });

  it('allows every tool when the only policy forbids another service entirely', () => {
    const set = preparePolicySet({ agentId: AGENT_ID, agentStatus: 'active', policyVersion: 1, policies: [record('no-vercel', 'vercel', {})] }, 'catalog:whole-service');
    for (const { service, tool } of allTools) {
      expect(evaluate(set, call(service, tool)).decision, `${service}/${tool}`).toBe(service === 'vercel' ? 'DENY' : 'ALLOW');
    }
  });
});
