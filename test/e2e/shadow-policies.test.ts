import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiClient } from '../support/api-client.ts';
import { connectMcp } from '../support/mcp-client.ts';
import { ownerAgentWithGithub } from '../support/owner-agent.ts';
import { startSplitTopology, type SplitTopology } from '../support/split-topology.ts';

/**
 * Issue 20 part 2 end to end: a shadow forbid written through the REST API is evaluated on
 * real MCP calls (split processes: gateway, PDP, audit, sandbox GitHub upstream; real NATS,
 * Postgres and chDB) without changing any verdict; its would-be DENYs land in the audit
 * entries and in the policy's shadow counts; promoting it enforces it (decisions 061-062).
 */
const OWNER = 'shadow-owner@example.com';

type CallResult = { isError?: boolean; content: Array<{ type: string; text: string }> };
interface AuditEntryView {
  id: string; tool: string; decision: 'ALLOW' | 'DENY'; reason: string;
  matchedPolicyIds: string[]; shadowDecision?: 'ALLOW' | 'DENY'; shadowPolicyIds?: string[];
}

const textOf = (result: CallResult) => result.content.map((c) => c.text).join('\n');

describe('shadow policies on real MCP calls', () => {
  let t: SplitTopology;
  let owner: ApiClient;
  let agentId: string;
  let memberKey: string;

  async function call(name: string, args: Record<string, unknown> = {}): Promise<CallResult> {
    const { client, transport } = await connectMcp(t.gateways[0]!, memberKey);
    try {
      return await client.callTool({ name, arguments: args }) as CallResult;
    } finally {
      await transport.terminateSession().catch(() => undefined);
      await client.close();
    }
  }

  /** The agent's audit entries, polled until `predicate` holds (5 s at most). */
  async function auditUntil(predicate: (entries: AuditEntryView[]) => boolean): Promise<AuditEntryView[]> {
    const deadline = Date.now() + 5_000;
    for (;;) {
      const res = await owner.call('GET', `/api/audit?agentId=${agentId}&limit=500`);
      expect(res.status, res.text).toBe(200);
      const entries = res.body.entries as AuditEntryView[];
      if (predicate(entries) || Date.now() > deadline) return entries;
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  beforeAll(async () => {
    t = await startSplitTopology({ gatewayCount: 1 });
    ({ owner, agentId, ownerKey: memberKey } = await ownerAgentWithGithub(t, { email: OWNER, agentName: 'Shadow agent' }));
  });
  afterAll(async () => { await t?.stop(); });

  it('a shadow forbid changes no verdict, its would-be DENYs are audited and counted, and promotion enforces it', async () => {
    const created = await owner.call('POST', `/api/agents/${agentId}/policies`, {
      name: 'No profile lookups', service: 'github', effect: 'forbid', tools: ['get_me'], principal: { type: 'all_members' },
      denyMessage: 'Profile lookups are blocked', mode: 'shadow',
    });
    expect(created.status, created.text).toBe(201);
    const policy = created.body as { id: string; policyKey: string; mode: string; shadowSince: string | null; version: number };
    expect(policy.mode).toBe('shadow');
    expect(Date.parse(policy.shadowSince!)).not.toBeNaN();

    // Two calls the shadow forbid covers go upstream and succeed; one it does not cover is untouched by it.
    for (let i = 0; i < 2; i++) {
      const result = await call('github__get_me');
      expect(result.isError, textOf(result)).toBeFalsy();
      expect(textOf(result)).toContain('olive');
    }
    expect((await call('github__search_repositories', { query: 'api' })).isError).toBeFalsy();

    const entries = await auditUntil((es) => es.filter((e) => e.tool === 'get_me' && e.shadowDecision !== undefined).length === 2
      && es.some((e) => e.tool === 'search_repositories' && e.shadowDecision !== undefined));
    const shadowed = entries.filter((e) => e.tool === 'get_me');
    expect(shadowed).toHaveLength(2);
    for (const e of shadowed) {
      expect(e).toMatchObject({ decision: 'ALLOW', shadowDecision: 'DENY', shadowPolicyIds: [policy.policyKey], matchedPolicyIds: [] });
      expect(e.reason).not.toContain('Profile lookups are blocked');
    }
    // A call the shadow policy does not cover: the agent has a shadow policy, so the entry says what shadow would do (the same).
    expect(entries.find((e) => e.tool === 'search_repositories')).toMatchObject({ decision: 'ALLOW', shadowDecision: 'ALLOW', shadowPolicyIds: [] });

    // The policy's counts since it went into shadow, with samples naming the entries.
    const results = await owner.call('GET', `/api/agents/${agentId}/policies/${policy.id}/shadow`);
    expect(results.status, results.text).toBe(200);
    expect(results.body).toMatchObject({ policyId: policy.id, shadowSince: policy.shadowSince, evaluated: 3, matched: 2, allowToDeny: 2, denyToAllow: 0 });
    expect((results.body.samples as Array<{ entryId: string }>).map((s) => s.entryId).sort()).toEqual(shadowed.map((e) => e.id).sort());
    expect(results.body.samples[0]).toMatchObject({ tool: 'get_me', service: 'github', decision: 'ALLOW', shadowDecision: 'DENY', memberName: OWNER });

    // Preview and simulate know the mode: a shadow draft compiles to the same Cedar with a note, and
    // simulate answers what it would change once promoted, saying it is in shadow.
    const draft = { name: 'No searches', service: 'github', effect: 'forbid', tools: ['search_repositories'], principal: { type: 'all_members' }, mode: 'shadow' };
    const preview = await owner.call('POST', `/api/agents/${agentId}/policies/preview`, draft);
    expect(preview.status, preview.text).toBe(200);
    expect(preview.body.errors).toEqual([]);
    expect(preview.body.cedar).toContain('forbid');
    expect(preview.body.warnings.join()).toContain('never changes a verdict until it is promoted');
    const simulated = await owner.call('POST', `/api/agents/${agentId}/policies/simulate`, { draft });
    expect(simulated.status, simulated.text).toBe(200);
    expect(simulated.body).toMatchObject({ mode: 'shadow', allowToDeny: 1, denyToAllow: 0, enforcedChanges: 0 });
    expect(simulated.body.samples[0]).toMatchObject({ tool: 'search_repositories', before: 'ALLOW', after: 'DENY' });

    // Promotion: one new version, enforced; the next call is denied by the policy and audited normally.
    const promoted = await owner.call('POST', `/api/agents/${agentId}/policies/${policy.id}/promote`);
    expect(promoted.status, promoted.text).toBe(200);
    expect(promoted.body).toMatchObject({ mode: 'enforce', shadowSince: null, version: policy.version + 1 });
    const versions = await owner.call('GET', `/api/agents/${agentId}/policies/${policy.id}/versions`);
    expect(versions.body.versions.map((v: { change: string }) => v.change)).toEqual(['promote', 'create']);
    expect(versions.body.versions[0].snapshot).toMatchObject({ mode: 'enforce' });
    expect(versions.body.versions[1].snapshot).toMatchObject({ mode: 'shadow' });

    const denied = await call('github__get_me');
    expect(denied.isError).toBe(true);
    expect(textOf(denied)).toContain('Profile lookups are blocked');
    const after = await auditUntil((es) => es.some((e) => e.tool === 'get_me' && e.decision === 'DENY'));
    const enforced = after.find((e) => e.tool === 'get_me' && e.decision === 'DENY')!;
    expect(enforced).toMatchObject({ reason: 'Profile lookups are blocked', matchedPolicyIds: [policy.policyKey] });
    // No shadow policy left on the agent: the entry carries no shadow verdict.
    expect(enforced.shadowDecision).toBeUndefined();
    expect(enforced.shadowPolicyIds).toBeUndefined();

    // Promoting again is a conflict; an enforced policy has no shadow results.
    expect((await owner.call('POST', `/api/agents/${agentId}/policies/${policy.id}/promote`)).status).toBe(409);
    expect((await owner.call('GET', `/api/agents/${agentId}/policies/${policy.id}/shadow`)).status).toBe(409);
  });
});
