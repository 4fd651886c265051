import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient, signInThroughOutbox, type ApiClient } from '../support/api-client.ts';
import { connectMcp, connectMcpDirect } from '../support/mcp-client.ts';
import { connectThroughConsent, sandboxControl } from '../support/oauth-consent.ts';
import { sandboxTokenIssuer } from '../support/fixtures.ts';
import { startSplitTopology, type SplitTopology } from '../support/split-topology.ts';

/**
 * Issue 5 end to end: policies written through the REST API decide real MCP calls. Split
 * processes (two gateways, the PDP, audit, sandbox) on real NATS and Postgres; the member
 * connected GitHub through the sandbox's OAuth server, so harvested repositories are real.
 *
 * The PDP's clock is moved through its configuration (`POLICY_CLOCK_OFFSET_MS`), never by
 * waiting: first to a Monday 11:00 in Paris, later (after a restart) to a Saturday.
 */
const OWNER = 'policy-owner@example.com';
const MONDAY_PARIS_11 = Date.parse('2026-11-30T10:00:00Z');
const SATURDAY_PARIS_11 = Date.parse('2026-11-28T10:00:00Z');
const offsetTo = (instant: number) => String(instant - Date.now());

type CallResult = { isError?: boolean; content: Array<{ type: string; text: string }> };
interface AuditEntryView {
  id: string; tool: string; decision: 'ALLOW' | 'DENY'; reason: string; sessionId?: string;
  toolArgs: Record<string, unknown>; matchedPolicyIds: string[]; policyVersionIds: string[];
}

const textOf = (result: CallResult) => result.content.map((c) => c.text).join('\n');

describe('policies decide real MCP calls (split processes, two gateways)', () => {
  let t: SplitTopology;
  let owner: ApiClient;
  let agentId: string;
  let memberKey: string;

  /** One tool call in a fresh MCP session through `gateway`, with `key` (the policy agent's member key unless told). */
  async function call(gateway: string, name: string, args: Record<string, unknown> = {}, key = memberKey): Promise<CallResult> {
    const { client, transport } = await connectMcp(gateway, key);
    try {
      return await client.callTool({ name, arguments: args }) as CallResult;
    } finally {
      await transport.terminateSession().catch(() => undefined);
      await client.close();
    }
  }

  async function createPolicy(body: Record<string, unknown>): Promise<{ id: string; policyKey: string }> {
    const res = await owner.call('POST', `/api/agents/${agentId}/policies`, { service: 'github', effect: 'forbid', principal: { type: 'all_members' }, ...body });
    expect(res.status, res.text).toBe(201);
    return res.body;
  }

  /** The agent's audit entries, polled until `predicate` holds (2 s at most). */
  async function auditUntil(predicate: (entries: AuditEntryView[]) => boolean): Promise<AuditEntryView[]> {
    const deadline = Date.now() + 2_000;
    for (;;) {
      const res = await owner.call('GET', '/api/audit?limit=500');
      expect(res.status).toBe(200);
      const entries = res.body.entries as AuditEntryView[];
      if (predicate(entries) || Date.now() > deadline) return entries;
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** Polls `gateway` with one call until it is denied (or allowed), returning how long that took. */
  async function untilDecision(gateway: string, name: string, args: Record<string, unknown>, denied: boolean, withinMs = 1_000): Promise<number> {
    const started = Date.now();
    for (;;) {
      const result = await call(gateway, name, args);
      if (Boolean(result.isError) === denied) return Date.now() - started;
      if (Date.now() - started > withinMs) throw new Error(`${name} on ${gateway} was not ${denied ? 'denied' : 'allowed'} within ${withinMs} ms: ${textOf(result)}`);
    }
  }

  beforeAll(async () => {
    t = await startSplitTopology({ gatewayCount: 2, env: { POLICY_CLOCK_OFFSET_MS: offsetTo(MONDAY_PARIS_11) } });
    owner = apiClient(t.gateways[0]!);
    await signInThroughOutbox(owner, t.outboxDir, OWNER);
    agentId = (await owner.call('POST', '/api/agents', { name: 'Policy agent' })).body.id;
    expect((await owner.call('PUT', `/api/agents/${agentId}/services`, { services: ['github'] })).status).toBe(200);
    const app = await sandboxControl(t.sandboxUrl, 'github/apps', { redirect_uris: t.gateways.map((g) => `${g}/api/oauth/callback`), name: 'Policy tests' });
    expect((await owner.call('PUT', `/api/agents/${agentId}/services/github/credentials`, { clientId: app.client_id, clientSecret: app.client_secret })).status).toBe(200);
    const memberId = (await owner.call('GET', `/api/agents/${agentId}`)).body.membership.id;
    memberKey = (await owner.call('PUT', `/api/agents/${agentId}/members/${memberId}/key`, {})).body.key;
    await connectThroughConsent(owner, agentId, 'github', 'alice');
  });
  afterAll(async () => { await t?.stop(); });

  it('a time-window forbid denies inside its window (the PDP\'s clock says Monday 11:00 in Paris)', async () => {
    await createPolicy({
      name: 'No repository search in office hours', tools: ['search_repositories'], denyMessage: 'Searching is for after hours',
      conditions: { timeWindow: { days: ['mon', 'tue', 'wed', 'thu', 'fri'], start: '09:00', end: '17:00', timeZone: 'Europe/Paris' } },
    });
    const inside = await call(t.gateways[1]!, 'github__search_repositories', { query: 'api' });
    expect(inside.isError).toBe(true);
    expect(textOf(inside)).toContain('Searching is for after hours');
    // The same tool outside the window's tools is untouched.
    expect((await call(t.gateways[1]!, 'github__get_me')).isError).toBeFalsy();
  });

  it('a session limit of 3 denies the 4th call in one session and allows a fresh session', async () => {
    await createPolicy({ name: 'Three lookups per session', tools: ['get_me'], denyMessage: 'Session limit reached', conditions: { sessionLimit: { maxCalls: 3 } } });
    const { client, transport } = await connectMcp(t.gateways[0]!, memberKey);
    const results: CallResult[] = [];
    for (let i = 0; i < 4; i++) results.push(await client.callTool({ name: 'github__get_me', arguments: {} }) as CallResult);
    expect(results.map((r) => Boolean(r.isError))).toEqual([false, false, false, true]);
    expect(textOf(results[3]!)).toContain('Session limit reached');
    const sessionId = transport.sessionId!;
    await transport.terminateSession().catch(() => undefined);
    await client.close();

    expect((await call(t.gateways[0]!, 'github__get_me')).isError).toBeFalsy();
    const entries = await auditUntil((es) => es.filter((e) => e.sessionId === sessionId).length === 4);
    expect(entries.filter((e) => e.sessionId === sessionId).map((e) => e.decision).sort()).toEqual(['ALLOW', 'ALLOW', 'ALLOW', 'DENY']);
  });

  it('an argument condition (owner = acme) denies only the calls that match', async () => {
    await createPolicy({ name: 'Hands off acme branches', tools: ['list_branches'], denyMessage: 'acme branches are off limits', conditions: { args: [{ path: 'owner', op: 'equals', value: 'acme' }] } });
    const matching = await call(t.gateways[0]!, 'github__list_branches', { owner: 'acme', repo: 'api' });
    expect(matching.isError).toBe(true);
    expect(textOf(matching)).toContain('acme branches are off limits');
    const other = await call(t.gateways[1]!, 'github__list_branches', { owner: 'acme-labs', repo: 'api' });
    expect(other.isError).toBeFalsy();
    expect(JSON.parse(textOf(other))).toMatchObject({ identity: { login: 'alice' }, arguments: { owner: 'acme-labs' } });
  });

  it('a catastrophic regex on a long argument decides at once and correctly, while another agent\'s call is answered (issue 15)', async () => {
    // A pattern RE2 cannot run is refused when written, naming the field; nothing is stored.
    const countBefore = (await owner.call('GET', `/api/agents/${agentId}/policies`)).body.total;
    const refused = await owner.call('POST', `/api/agents/${agentId}/policies`, {
      name: 'Lookahead', service: 'github', effect: 'forbid', principal: { type: 'all_members' }, tools: ['issue_write'],
      conditions: { args: [{ path: 'title', op: 'regex', pattern: '^(?!draft)' }] },
    });
    expect(refused.status, refused.text).toBe(400);
    expect(refused.body.error).toMatchObject({ code: 'invalid_request', details: { field: 'conditions.args.0.pattern' }, message: expect.stringMatching(/RE2/) });
    expect((await owner.call('GET', `/api/agents/${agentId}/policies`)).body.total).toBe(countBefore);

    // `^(a+)+$` takes a backtracking engine exponential time in the length of "aaa…a!".
    await createPolicy({
      name: 'Titles of only a', tools: ['issue_write'], denyMessage: 'Titles of only "a" are off limits',
      conditions: { args: [{ path: 'title', op: 'regex', pattern: '^(a+)+$' }] },
    });

    // Another agent of the same owner, with a member of its own and no policy.
    const otherId = (await owner.call('POST', '/api/agents', { name: 'Bystander agent' })).body.id as string;
    expect((await owner.call('PUT', `/api/agents/${otherId}/services`, { services: ['github'] })).status).toBe(200);
    const app = await sandboxControl(t.sandboxUrl, 'github/apps', { redirect_uris: t.gateways.map((g) => `${g}/api/oauth/callback`), name: 'Bystander' });
    expect((await owner.call('PUT', `/api/agents/${otherId}/services/github/credentials`, { clientId: app.client_id, clientSecret: app.client_secret })).status).toBe(200);
    const otherMemberId = (await owner.call('GET', `/api/agents/${otherId}`)).body.membership.id;
    const otherKey = (await owner.call('PUT', `/api/agents/${otherId}/members/${otherMemberId}/key`, {})).body.key as string;
    await connectThroughConsent(owner, otherId, 'github', 'alice');

    const issue = (title: string) => ({ method: 'create', owner: 'acme', repo: 'web', title });
    const [noMatch, match, overLong, bystander] = await Promise.all([
      call(t.gateways[0]!, 'github__issue_write', issue(`${'a'.repeat(4_000)}!`)),
      call(t.gateways[1]!, 'github__issue_write', issue('a'.repeat(4_000))),
      // Longer than the 4,096 characters a pattern is run on: a forbid fails closed (decision 020).
      call(t.gateways[0]!, 'github__issue_write', issue('b'.repeat(5_000))),
      call(t.gateways[1]!, 'github__get_me', {}, otherKey),
    ]);
    expect(noMatch.isError, textOf(noMatch)).toBeFalsy();
    expect(match.isError).toBe(true);
    expect(textOf(match)).toBe('Titles of only "a" are off limits');
    expect(overLong.isError).toBe(true);
    expect(textOf(overLong)).toBe('Titles of only "a" are off limits');
    expect(bystander.isError, textOf(bystander)).toBeFalsy();
    expect(JSON.parse(textOf(bystander))).toMatchObject({ identity: { login: 'alice' } });
  });

  it('a resource condition on a harvested repository denies calls on that repository only', async () => {
    const repos = await owner.call('GET', `/api/agents/${agentId}/entities/github/repositories?search=infra`);
    expect(repos.status).toBe(200);
    const [infra] = repos.body.entities as Array<{ id: string }>;
    expect(infra!.id).toBe('acme/infra');
    await createPolicy({ name: 'Infra issues are private', tools: ['list_issues'], denyMessage: 'Not on the infra repository', conditions: { resources: { match: 'in', ids: [infra!.id] } } });

    const onInfra = await call(t.gateways[0]!, 'github__list_issues', { owner: 'acme', repo: 'infra' });
    expect(onInfra.isError).toBe(true);
    expect(textOf(onInfra)).toContain('Not on the infra repository');
    expect((await call(t.gateways[1]!, 'github__list_issues', { owner: 'acme', repo: 'api' })).isError).toBeFalsy();
  });

  it('an entry from before an edit still names the old version; restoring it makes every replica follow it again within 1 s', async () => {
    const [g1, g2] = t.gateways as [string, string];
    const policy = await createPolicy({ name: 'Commits of one owner', tools: ['list_commits'], denyMessage: 'v1: not acme', conditions: { args: [{ path: 'owner', op: 'equals', value: 'acme' }] } });
    const versionsOf = async () => (await owner.call('GET', `/api/agents/${agentId}/policies/${policy.id}/versions`)).body.versions as Array<{ id: string; version: number }>;
    const [v1] = await versionsOf();

    const denied = await call(g1, 'github__list_commits', { owner: 'acme', repo: 'api' });
    expect(textOf(denied)).toContain('v1: not acme');
    const before = (await auditUntil((es) => es.some((e) => e.tool === 'list_commits'))).find((e) => e.tool === 'list_commits')!;
    expect(before).toMatchObject({ decision: 'DENY', matchedPolicyIds: [policy.policyKey], policyVersionIds: [v1!.id] });

    // Edit: now it is acme-labs that is forbidden. Both replicas follow within 1 s.
    const edited = await owner.call('PUT', `/api/agents/${agentId}/policies/${policy.id}`, {
      name: 'Commits of one owner', service: 'github', effect: 'forbid', principal: { type: 'all_members' }, tools: ['list_commits'],
      denyMessage: 'v2: not acme-labs', conditions: { args: [{ path: 'owner', op: 'equals', value: 'acme-labs' }] },
    });
    expect(edited.status, edited.text).toBe(200);
    expect(edited.body.version).toBe(2);
    const followed = await Promise.all([g1, g2].map((g) => untilDecision(g, 'github__list_commits', { owner: 'acme', repo: 'api' }, false)));
    expect(Math.max(...followed)).toBeLessThanOrEqual(1_000);
    expect(textOf(await call(g2, 'github__list_commits', { owner: 'acme-labs', repo: 'api' }))).toContain('v2: not acme-labs');

    const versions = await versionsOf();
    expect(versions.map((v) => v.version)).toEqual([2, 1]);
    const afterEdit = await auditUntil((es) => es.some((e) => e.tool === 'list_commits' && e.policyVersionIds.includes(versions[0]!.id)));
    expect(afterEdit.find((e) => e.id === before.id)).toMatchObject({ policyVersionIds: [v1!.id], reason: 'v1: not acme' });
    expect(afterEdit.find((e) => e.tool === 'list_commits' && e.decision === 'DENY' && e.id !== before.id)).toMatchObject({ policyVersionIds: [versions[0]!.id] });

    // Roll back to version 1: acme is forbidden again on every replica within 1 s.
    const restored = await owner.call('POST', `/api/agents/${agentId}/policies/${policy.id}/versions/${v1!.id}/restore`);
    expect(restored.status, restored.text).toBe(200);
    expect(restored.body).toMatchObject({ version: 3, denyMessage: 'v1: not acme', conditions: { args: [{ path: 'owner', op: 'equals', value: 'acme' }] } });
    const rolledBack = await Promise.all([g1, g2].map((g) => untilDecision(g, 'github__list_commits', { owner: 'acme', repo: 'api' }, true)));
    expect(Math.max(...rolledBack)).toBeLessThanOrEqual(1_000);
    expect((await call(g2, 'github__list_commits', { owner: 'acme-labs', repo: 'api' })).isError).toBeFalsy();
  });

  it('with the PDP killed during calls, every call in the gap is DENY "policy service unavailable", audited, never forwarded', async () => {
    const { client, transport } = await connectMcp(t.gateways[0]!, memberKey);
    const outcomes: Array<{ title: string; phase: 'before' | 'gap' | 'after'; result: CallResult }> = [];
    const create = async (phase: 'before' | 'gap' | 'after') => {
      const title = `pdp-${phase}-${outcomes.length}`;
      const result = await client.callTool({ name: 'github__issue_write', arguments: { method: 'create', owner: 'acme', repo: 'web', title } }) as CallResult;
      outcomes.push({ title, phase, result });
      return result;
    };
    for (let i = 0; i < 3; i++) await create('before');
    await t.processes.policy!.stop('SIGKILL');
    for (let i = 0; i < 5; i++) await create('gap');
    // Back, with the clock moved to a Saturday (outside the office-hours window).
    await t.restart('policy', { POLICY_CLOCK_OFFSET_MS: offsetTo(SATURDAY_PARIS_11) });
    const deadline = Date.now() + 15_000;
    while ((await create('after')).isError && Date.now() < deadline);
    await transport.terminateSession().catch(() => undefined);
    await client.close();

    const byPhase = (phase: string) => outcomes.filter((o) => o.phase === phase);
    expect(byPhase('before').every((o) => !o.result.isError)).toBe(true);
    for (const o of byPhase('gap')) {
      expect(o.result.isError).toBe(true);
      expect(textOf(o.result)).toMatch(/policy service unavailable/i);
    }
    const after = byPhase('after');
    expect(after.at(-1)!.result.isError).toBeFalsy();
    for (const o of after.filter((a) => a.result.isError)) expect(textOf(o.result)).toMatch(/policy service unavailable/i);

    // Audited once each, with the decision the caller saw.
    const entries = await auditUntil((es) => outcomes.every((o) => es.some((e) => e.toolArgs.title === o.title)));
    for (const o of outcomes) {
      const mine = entries.filter((e) => e.tool === 'issue_write' && e.toolArgs.title === o.title);
      expect(mine).toHaveLength(1);
      expect(mine[0]!.decision).toBe(o.result.isError ? 'DENY' : 'ALLOW');
      if (o.result.isError) expect(mine[0]!.reason).toMatch(/policy service unavailable/i);
    }

    // The upstream holds exactly the issues of the allowed calls.
    const token = await sandboxTokenIssuer(t.sandboxUrl)('github', { login: 'alice', name: 'Alice' });
    const direct = await connectMcpDirect(`${t.sandboxUrl}/github/mcp`, token);
    const listed = await direct.callTool({ name: 'list_issues', arguments: { owner: 'acme', repo: 'web' } }) as CallResult;
    await direct.close();
    const upstreamTitles = (JSON.parse(textOf(listed)).items as Array<{ title: string }>).map((i) => i.title).filter((title) => title.startsWith('pdp-'));
    expect(upstreamTitles.sort()).toEqual(outcomes.filter((o) => !o.result.isError).map((o) => o.title).sort());
  });

  it('after the restart the PDP\'s clock says Saturday: the office-hours forbid no longer applies', async () => {
    for (const gateway of t.gateways) {
      // The second gateway made no call since the restart: its channel may still be in its
      // reconnect back-off (250 ms–2 s), when calls are denied as unavailable (fail closed).
      let result = await call(gateway, 'github__search_repositories', { query: 'api' });
      for (let i = 0; i < 30 && result.isError && /policy service unavailable/i.test(textOf(result)); i++) {
        await new Promise((r) => setTimeout(r, 100));
        result = await call(gateway, 'github__search_repositories', { query: 'api' });
      }
      expect(result.isError, textOf(result)).toBeFalsy();
    }
  });
});
