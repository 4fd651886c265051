import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { and, eq } from 'drizzle-orm';
import { getConnector, schema } from '@portcullis/core';
import { createApiHarness, signInRoleActors, type ApiHarness, type RoleActors } from '../testing/index.ts';

/**
 * The policies API without a PDP or audit service (the harness points both nowhere): lists,
 * toggles, deletes, history and every refusal that comes before compiling. What needs the
 * PDP's Preview to succeed is in test/integration/policies-api.test.ts.
 */

let h: ApiHarness;
let roles: RoleActors;
let owner: string;

beforeAll(async () => {
  h = await createApiHarness();
  roles = await signInRoleActors(h, 'pol');
  owner = roles.cookieOf.owner!;
});
afterAll(async () => { await h.close(); });

const settle = () => new Promise((r) => setTimeout(r, 0));

async function ownerUserId(): Promise<string> {
  return (await h.db.select({ id: schema.users.id }).from(schema.users).where(eq(schema.users.email, roles.email.owner)))[0]!.id;
}

/** A stored policy with its first version, as a create through the PDP leaves it. */
async function seedPolicy(agentId: string, over: Partial<typeof schema.policies.$inferInsert> = {}) {
  const [policy] = await h.db.insert(schema.policies).values({
    agentId, policyKey: `p-${randomUUID().slice(0, 8)}`, name: 'Seeded', service: 'github', effect: 'forbid', principal: { type: 'all_members' }, ...over,
  }).returning();
  const [version] = await h.db.insert(schema.policyVersions).values({
    agentId, policyId: policy!.id, version: 1, change: 'create', snapshot: { policyKey: policy!.policyKey }, cedar: `@id("${policy!.policyKey}")\nforbid (principal, action, resource);`, authorUserId: await ownerUserId(),
  }).returning();
  await h.db.update(schema.policies).set({ currentVersionId: version!.id }).where(eq(schema.policies.id, policy!.id));
  return { ...policy!, currentVersionId: version!.id };
}

async function stateOf(agentId: string) {
  const policies = await h.db.select().from(schema.policies).where(eq(schema.policies.agentId, agentId)).orderBy(schema.policies.policyKey);
  const versions = await h.db.select({ id: schema.policyVersions.id }).from(schema.policyVersions).where(eq(schema.policyVersions.agentId, agentId));
  const [agent] = await h.db.select({ policyVersion: schema.agents.policyVersion, defaultDecision: schema.agents.defaultDecision }).from(schema.agents).where(eq(schema.agents.id, agentId));
  const events = h.events.filter((e) => 'agentId' in e && e.agentId === agentId).length;
  return { policies, versions: versions.length, agent, events };
}

const validBody = { name: 'No deletes', service: 'github', effect: 'forbid', tools: ['delete_repository'], principal: { type: 'all_members' } };

describe('GET /api/agents/:id/policies', () => {
  let agentId: string;
  beforeAll(async () => {
    agentId = await roles.agentWithMembers({ name: 'Listing' });
    await seedPolicy(agentId, { policyKey: 'alpha', name: 'alpha rule', service: 'github', effect: 'forbid', mode: 'shadow', shadowSince: new Date('2026-01-01'), createdAt: new Date('2026-01-01') });
    await seedPolicy(agentId, { policyKey: 'beta', name: 'Beta rule', service: 'slack', effect: 'permit', enabled: false, createdAt: new Date('2026-01-02') });
    await seedPolicy(agentId, { policyKey: 'gamma', name: 'Gamma 100%', service: 'github', effect: 'forbid', denyMessage: 'Not now', createdAt: new Date('2026-01-03') });
  });
  const list = async (query = '') => {
    const res = await h.request({ method: 'GET', url: `/api/agents/${agentId}/policies${query}`, cookie: owner });
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as { policies: Array<Record<string, unknown>>; total: number };
  };
  const keys = (r: { policies: Array<Record<string, unknown>> }) => r.policies.map((p) => p.policyKey);

  it('answers every field of the spec\'s Policy table; trigger counts are null while the audit service is unreachable', async () => {
    const { policies, total } = await list();
    expect(total).toBe(3);
    expect(keys({ policies })).toEqual(['gamma', 'beta', 'alpha']);
    expect(policies[0]).toEqual({
      // Neither tools nor tiers named: the policy covers every tool of the service.
      id: expect.any(String), policyKey: 'gamma', name: 'Gamma 100%', service: 'github', effect: 'forbid', tools: getConnector('github')!.tools.map((t) => t.name), listedTools: [], tiers: [],
      principal: { type: 'all_members' }, conditions: {}, denyMessage: 'Not now', enabled: true, mode: 'enforce', shadowSince: null, version: 1, currentVersionId: expect.any(String),
      triggerCount: null, lastTriggered: null, createdAt: '2026-01-03T00:00:00.000Z', updatedAt: expect.any(String),
    });
  });

  it('shows the tools a tier-based policy covers (tiers expanded, catalog order) beside the tiers and tools it was written with', async () => {
    const agent = await roles.agentWithMembers({ name: 'Tiers' });
    await seedPolicy(agent, { policyKey: 'tiers', tools: ['get_me'], tiers: ['destructive'] });
    const res = await h.request({ method: 'GET', url: `/api/agents/${agent}/policies`, cookie: owner });
    expect(res.statusCode, res.body).toBe(200);
    const [policy] = res.json().policies;
    const github = getConnector('github')!.tools;
    expect(policy).toMatchObject({ listedTools: ['get_me'], tiers: ['destructive'] });
    expect(policy.tools).toEqual(github.filter((t) => t.name === 'get_me' || t.tier === 'destructive').map((t) => t.name));
    expect(policy.tools).toEqual(expect.arrayContaining(['get_me', 'delete_repository', 'delete_file']));
  });

  it('lists a stored policy whose pattern RE2 refuses (written before RE2), instead of failing', async () => {
    const agent = await roles.agentWithMembers({ name: 'Legacy pattern' });
    const conditions = { args: [{ path: 'owner', op: 'regex', pattern: '^(?!acme$)' }] };
    await seedPolicy(agent, { policyKey: 'legacy', tools: ['list_branches'], conditions });
    const res = await h.request({ method: 'GET', url: `/api/agents/${agent}/policies`, cookie: owner });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().policies[0]).toMatchObject({ policyKey: 'legacy', conditions });
  });

  it.each([
    ['?service=slack', ['beta']],
    ['?effect=forbid', ['gamma', 'alpha']],
    ['?enabled=false', ['beta']],
    ['?enabled=true&service=github', ['gamma', 'alpha']],
    ['?mode=shadow', ['alpha']],
    ['?mode=enforce', ['gamma', 'beta']],
    ['?mode=enforce&effect=forbid', ['gamma']],
    ['?search=RULE', ['beta', 'alpha']],
    ['?search=gam', ['gamma']],
    ['?search=%25', ['gamma']],
    ['?search=_', []],
    ['?service=nope', []],
    ['?sortBy=name&sortDir=asc', ['alpha', 'beta', 'gamma']],
    ['?sortBy=policyKey&sortDir=desc', ['gamma', 'beta', 'alpha']],
    ['?sortBy=enabled&sortDir=asc', ['beta', 'alpha', 'gamma']],
    ['?sortBy=createdAt&sortDir=asc&limit=2', ['alpha', 'beta']],
    ['?sortBy=createdAt&sortDir=asc&limit=2&offset=2', ['gamma']],
  ])('%s', async (query, expected) => {
    const result = await list(query);
    expect(keys(result)).toEqual(expected);
    if (!query.includes('limit')) expect(result.total).toBe(expected.length);
    else expect(result.total).toBe(3);
  });

  it.each(['?limit=0', '?sortBy=triggerCount', '?enabled=yes', '?effect=maybe', '?mode=dry-run', '?bogus=1', '?offset=-1'])('refuses %s with 400 naming the field', async (query) => {
    const res = await h.request({ method: 'GET', url: `/api/agents/${agentId}/policies${query}`, cookie: owner });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: { code: 'invalid_request', details: { field: expect.any(String) } } });
  });
});

describe('refusals before anything is compiled or stored', () => {
  let agentId: string;
  let memberId: string;
  beforeAll(async () => {
    agentId = await roles.agentWithMembers({ name: 'Refusals' });
    await seedPolicy(agentId, { policyKey: 'taken' });
    const rows = await h.db.select().from(schema.members).where(and(eq(schema.members.agentId, agentId), eq(schema.members.email, roles.email.member)));
    memberId = rows[0]!.id;
  });

  it.each<[string, Record<string, unknown>, string]>([
    ['unknown service', { ...validBody, service: 'myspace', tools: [] }, 'service'],
    ['unknown tool', { ...validBody, tools: ['issue_write', 'launch_rockets'] }, 'tools.1'],
    ['a tool of another connector', { ...validBody, tools: ['post_message'] }, 'tools.0'],
    ['unknown tier', { ...validBody, tiers: ['dangerous'] }, 'tiers.0'],
    ['bad effect', { ...validBody, effect: 'maybe' }, 'effect'],
    ['empty name', { ...validBody, name: '  ' }, 'name'],
    ['reserved key', { ...validBody, policyKey: 'portcullis.base' }, 'policyKey'],
    ['key with spaces', { ...validBody, policyKey: 'two words' }, 'policyKey'],
    ['principal ids not uuids', { ...validBody, principal: { type: 'members', ids: ['bob'] } }, 'principal.ids.0'],
    ['principal id not a member of this agent', { ...validBody, principal: { type: 'members', ids: [randomUUID()] } }, 'principal.ids.0'],
    ['bad regex', { ...validBody, conditions: { args: [{ path: 'owner', op: 'regex', pattern: '(' }] } }, 'conditions.args.0.pattern'],
    // RE2 runs patterns in linear time and has neither backreferences nor lookaround (decision 020).
    ['a regex backreference', { ...validBody, conditions: { args: [{ path: 'owner', op: 'equals', value: 'acme' }, { path: 'repo', op: 'regex', pattern: '^(\\w)\\1' }] } }, 'conditions.args.1.pattern'],
    ['a regex lookahead', { ...validBody, conditions: { args: [{ path: 'owner', op: 'regex', pattern: '^(?!acme$)' }] } }, 'conditions.args.0.pattern'],
    ['a regex too large to run cheaply', { ...validBody, conditions: { args: [{ path: 'owner', op: 'regex', pattern: '[a-z]{1000}' }] } }, 'conditions.args.0.pattern'],
    ['bad time zone', { ...validBody, conditions: { timeWindow: { days: ['mon'], start: '09:00', end: '17:00', timeZone: 'Mars/Olympus' } } }, 'conditions.timeWindow.timeZone'],
    ['malformed time', { ...validBody, conditions: { timeWindow: { days: ['mon'], start: '9am', end: '17:00', timeZone: 'UTC' } } }, 'conditions.timeWindow.start'],
    // Unknown keys: the shared validation names each key with its path (decision 039).
    ['unknown condition', { ...validBody, conditions: { moonPhase: 'full' } }, 'conditions.moonPhase'],
    ['unknown field', { ...validBody, priority: 1 }, 'priority'],
  ])('%s → 400 naming %2$s, nothing changed', async (_label, payload, field) => {
    const before = await stateOf(agentId);
    const res = await h.request({ method: 'POST', url: `/api/agents/${agentId}/policies`, payload, cookie: owner });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toMatchObject({ error: { code: 'invalid_request', details: { field: expect.stringContaining(field) } } });
    if (field === 'conditions.moonPhase' || field === 'priority') expect(res.json().error.message).toMatch(/^Unknown field\(s\) in body: (conditions\.moonPhase|priority)$/);
    if (payload.conditions && JSON.stringify(payload.conditions).includes('regex')) expect(res.json().error.message).toMatch(/RE2|too complex/);
    const seeded = (await h.db.select().from(schema.policies).where(eq(schema.policies.agentId, agentId)))[0]!;
    const put = await h.request({ method: 'PUT', url: `/api/agents/${agentId}/policies/${seeded.id}`, payload, cookie: owner });
    expect(put.statusCode, put.body).toBe(400);
    await settle();
    expect(await stateOf(agentId)).toEqual(before);
  });

  it('a listed member of this agent passes validation (then the absent PDP answers 503, nothing stored)', async () => {
    const before = await stateOf(agentId);
    const res = await h.request({ method: 'POST', url: `/api/agents/${agentId}/policies`, payload: { ...validBody, principal: { type: 'members', ids: [memberId] } }, cookie: owner });
    expect(res.statusCode, res.body).toBe(503);
    expect(res.json()).toMatchObject({ error: { code: 'unavailable' } });
    await settle();
    expect(await stateOf(agentId)).toEqual(before);
  });

  it('a duplicate policyKey is 409, on create and on update', async () => {
    const before = await stateOf(agentId);
    const res = await h.request({ method: 'POST', url: `/api/agents/${agentId}/policies`, payload: { ...validBody, policyKey: 'taken' }, cookie: owner });
    expect(res.statusCode, res.body).toBe(409);
    expect(res.json()).toMatchObject({ error: { code: 'conflict', details: { field: 'policyKey' } } });
    const other = await seedPolicy(agentId, { policyKey: 'other' });
    const put = await h.request({ method: 'PUT', url: `/api/agents/${agentId}/policies/${other.id}`, payload: { ...validBody, policyKey: 'taken' }, cookie: owner });
    expect(put.statusCode, put.body).toBe(409);
    await h.db.delete(schema.policyVersions).where(eq(schema.policyVersions.policyId, other.id));
    await h.db.delete(schema.policies).where(eq(schema.policies.id, other.id));
    await settle();
    expect(await stateOf(agentId)).toEqual(before);
  });

  it('an unknown policy, or one of another agent, is 404 on every policy route', async () => {
    const elsewhere = await roles.agentWithMembers({ name: 'Elsewhere' });
    const foreign = await seedPolicy(elsewhere, { policyKey: 'foreign' });
    for (const policyId of [randomUUID(), foreign.id]) {
      for (const [method, suffix, payload] of [
        ['PUT', '', validBody], ['DELETE', '', undefined], ['POST', '/toggle', undefined], ['GET', '/versions', undefined],
        ['POST', `/versions/${foreign.currentVersionId}/restore`, undefined],
      ] as const) {
        const res = await h.request({ method, url: `/api/agents/${agentId}/policies/${policyId}${suffix}`, ...(payload ? { payload } : {}), cookie: owner });
        expect(res.statusCode, `${method} ${suffix} ${res.body}`).toBe(404);
      }
    }
    expect(await stateOf(elsewhere)).toMatchObject({ versions: 1, agent: { policyVersion: 0 } });
  });

  it('refuses bad path ids with 400', async () => {
    const res = await h.request({ method: 'POST', url: `/api/agents/${agentId}/policies/not-a-uuid/toggle`, cookie: owner });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: { details: { field: 'policyId' } } });
  });
});

describe('toggle, delete and history (no PDP needed: the Cedar text is unchanged)', () => {
  it('toggles through both URL forms: a version per toggle, policy_version bumped, policy.changed published', async () => {
    const agentId = await roles.agentWithMembers({ name: 'Toggles' });
    const policy = await seedPolicy(agentId, { policyKey: 'nightly' });
    const first = await h.request({ method: 'POST', url: `/api/agents/${agentId}/policies/${policy.id}/toggle`, cookie: owner });
    expect(first.statusCode, first.body).toBe(200);
    expect(first.json()).toMatchObject({ id: policy.id, enabled: false, version: 2 });
    await settle();
    expect(h.events).toContainEqual({ kind: 'policy.changed', agentId, policyVersion: 1 });

    const second = await h.request({ method: 'POST', url: `/api/policies/${policy.id}/toggle`, cookie: owner });
    expect(second.statusCode, second.body).toBe(200);
    expect(second.json()).toMatchObject({ enabled: true, version: 3 });
    await settle();
    expect(h.events).toContainEqual({ kind: 'policy.changed', agentId, policyVersion: 2 });
    expect((await stateOf(agentId)).agent!.policyVersion).toBe(2);

    const versions = await h.request({ method: 'GET', url: `/api/agents/${agentId}/policies/${policy.id}/versions`, cookie: owner });
    expect(versions.statusCode).toBe(200);
    const list = (versions.json() as { versions: Array<Record<string, unknown>> }).versions;
    expect(list.map((v) => [v.version, v.change])).toEqual([[3, 'toggle'], [2, 'toggle'], [1, 'create']]);
    expect(list[0]).toMatchObject({ author: { id: await ownerUserId(), email: roles.email.owner }, cedar: expect.stringContaining('@id("nightly")'), snapshot: { policyKey: 'nightly', enabled: true } });
    expect(list[1]).toMatchObject({ snapshot: { enabled: false } });
    const [row] = await h.db.select().from(schema.policies).where(eq(schema.policies.id, policy.id));
    expect(row!.currentVersionId).toBe(list[0]!.id);
  });

  it('the un-prefixed toggle answers 404 to anyone who is not an owner of the policy\'s agent, 403 to its members', async () => {
    const agentId = await roles.agentWithMembers({ name: 'Bare toggle' });
    const policy = await seedPolicy(agentId);
    const before = await stateOf(agentId);
    for (const [actor, status] of [['outsider', 404], ['rejected', 404], ['pending', 403], ['member', 403]] as const) {
      const res = await h.request({ method: 'POST', url: `/api/policies/${policy.id}/toggle`, cookie: roles.cookieOf[actor]! });
      expect(res.statusCode, actor).toBe(status);
    }
    const ghost = await h.request({ method: 'POST', url: `/api/policies/${randomUUID()}/toggle`, cookie: roles.cookieOf.outsider! });
    expect(ghost.statusCode).toBe(404);
    expect((await h.request({ method: 'POST', url: `/api/policies/${policy.id}/toggle` })).statusCode).toBe(401);
    await settle();
    expect(await stateOf(agentId)).toEqual(before);
  });

  it('deletes: the history stays readable and ends with a delete version; restoring needs the PDP (503, nothing changed)', async () => {
    const agentId = await roles.agentWithMembers({ name: 'Deletes' });
    const policy = await seedPolicy(agentId, { policyKey: 'doomed', name: 'Doomed', tools: ['delete_repository'] });
    const res = await h.request({ method: 'DELETE', url: `/api/agents/${agentId}/policies/${policy.id}`, cookie: owner });
    expect(res.statusCode, res.body).toBe(204);
    await settle();
    expect(h.events).toContainEqual({ kind: 'policy.changed', agentId, policyVersion: 1 });
    const after = await stateOf(agentId);
    expect(after.policies).toEqual([]);
    expect(after.agent!.policyVersion).toBe(1);

    const versions = await h.request({ method: 'GET', url: `/api/agents/${agentId}/policies/${policy.id}/versions`, cookie: owner });
    expect(versions.statusCode).toBe(200);
    const list = (versions.json() as { versions: Array<Record<string, unknown>> }).versions;
    expect(list.map((v) => v.change)).toEqual(['delete', 'create']);
    expect(list[0]).toMatchObject({ version: 2, snapshot: { policyKey: 'doomed', name: 'Doomed', tools: ['delete_repository'] }, cedar: expect.stringContaining('doomed') });

    const again = await h.request({ method: 'DELETE', url: `/api/agents/${agentId}/policies/${policy.id}`, cookie: owner });
    expect(again.statusCode).toBe(404);
    const restore = await h.request({ method: 'POST', url: `/api/agents/${agentId}/policies/${policy.id}/versions/${list[0]!.id}/restore`, cookie: owner });
    expect(restore.statusCode, restore.body).toBe(503);
    const unknownVersion = await h.request({ method: 'POST', url: `/api/agents/${agentId}/policies/${policy.id}/versions/${randomUUID()}/restore`, cookie: owner });
    expect(unknownVersion.statusCode).toBe(404);
    await settle();
    expect(await stateOf(agentId)).toEqual(after);
  });
});

describe('preview and simulate without a PDP', () => {
  let agentId: string;
  beforeAll(async () => { agentId = await roles.agentWithMembers({ name: 'Drafts' }); });

  it('preview answers a malformed draft with 200 and its errors', async () => {
    const res = await h.request({ method: 'POST', url: `/api/agents/${agentId}/policies/preview`, payload: { name: 'x', service: 'github', effect: 'sometimes', principal: { type: 'all_members' } }, cookie: owner });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ cedar: '', errors: [expect.stringMatching(/^effect: /)], warnings: [] });
  });

  it('preview refuses a tool or service the catalog does not have with 400 naming the field (as create does), instead of Cedar that forbids the whole connector', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ ...validBody, tools: ['delete_repository', 'no_such_tool'] }, 'tools.1'],
      [{ ...validBody, tools: ['definitely_not_a_tool'] }, 'tools.0'],
      [{ ...validBody, service: 'myspace', tools: [] }, 'service'],
    ];
    for (const [payload, field] of cases) {
      const res = await h.request({ method: 'POST', url: `/api/agents/${agentId}/policies/preview`, payload, cookie: owner });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toMatchObject({ error: { code: 'invalid_request', details: { field, in: 'body' } } });
      expect(res.body).not.toMatch(/forbid/);
      // Saving the same draft is refused the same way.
      const saved = await h.request({ method: 'POST', url: `/api/agents/${agentId}/policies`, payload, cookie: owner });
      expect(saved.statusCode, saved.body).toBe(400);
      expect(saved.json()).toMatchObject({ error: { details: { field } } });
    }
  });

  it('preview of a well-formed draft needs the PDP: 503 unavailable', async () => {
    const res = await h.request({ method: 'POST', url: `/api/agents/${agentId}/policies/preview`, payload: validBody, cookie: owner });
    expect(res.statusCode, res.body).toBe(503);
    expect(res.json()).toMatchObject({ error: { code: 'unavailable' } });
  });

  it('simulate needs the PDP: 503 unavailable', async () => {
    const res = await h.request({ method: 'POST', url: `/api/agents/${agentId}/policies/simulate`, payload: { draft: validBody, limit: 100 }, cookie: owner });
    expect(res.statusCode, res.body).toBe(503);
  });

  it.each<[string, Record<string, unknown>, string]>([
    ['limit above 10,000', { draft: validBody, limit: 10_001 }, 'limit'],
    ['a bad draft', { draft: { ...validBody, service: 'nope' } }, 'draft.service'],
    ['a draft tool unknown', { draft: { ...validBody, tools: ['nope'] } }, 'draft.tools.0'],
    ['replacePolicyId of no policy here', { draft: validBody, replacePolicyId: randomUUID() }, 'replacePolicyId'],
    ['from after to', { draft: validBody, from: '2026-02-01', to: '2026-01-01' }, 'from'],
    ['no draft', {}, 'draft'],
  ])('simulate refuses %s with 400 naming %s', async (_label, payload, field) => {
    const res = await h.request({ method: 'POST', url: `/api/agents/${agentId}/policies/simulate`, payload, cookie: owner });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toMatchObject({ error: { code: 'invalid_request', details: { field } } });
  });
});

describe('PUT /api/agents/:id defaultDecision', () => {
  it('is shown in the Agent view; a change bumps policy_version and publishes policy.changed, the same value does not', async () => {
    const agentId = await roles.agentWithMembers({ name: 'Default deny' });
    const detail = await h.request({ method: 'GET', url: `/api/agents/${agentId}`, cookie: owner });
    expect(detail.json()).toMatchObject({ defaultDecision: 'allow' });
    const res = await h.request({ method: 'PUT', url: `/api/agents/${agentId}`, payload: { defaultDecision: 'deny' }, cookie: owner });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ defaultDecision: 'deny', name: 'Default deny' });
    await settle();
    expect(h.events).toContainEqual({ kind: 'policy.changed', agentId, policyVersion: 1 });
    expect((await stateOf(agentId)).agent).toEqual({ policyVersion: 1, defaultDecision: 'deny' });

    const same = await h.request({ method: 'PUT', url: `/api/agents/${agentId}`, payload: { defaultDecision: 'deny', name: 'Renamed' }, cookie: owner });
    expect(same.statusCode).toBe(200);
    expect((await stateOf(agentId)).agent).toEqual({ policyVersion: 1, defaultDecision: 'deny' });

    const bad = await h.request({ method: 'PUT', url: `/api/agents/${agentId}`, payload: { defaultDecision: 'maybe' }, cookie: owner });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({ error: { details: { field: 'defaultDecision' } } });
    const member = await h.request({ method: 'PUT', url: `/api/agents/${agentId}`, payload: { defaultDecision: 'allow' }, cookie: roles.cookieOf.member! });
    expect(member.statusCode).toBe(403);
  });
});

describe('shadow policies: promote and shadow results (decisions 061-062)', () => {
  let agentId: string;
  beforeAll(async () => {
    agentId = await roles.agentWithMembers({ name: 'Shadows' });
  });

  it('promotes a shadow policy in one new version: enforced, same Cedar, shadowSince cleared, policy.changed announced', async () => {
    const since = new Date('2026-02-01T00:00:00Z');
    const policy = await seedPolicy(agentId, { policyKey: 'shadowed', mode: 'shadow', shadowSince: since });
    const listed = (await h.request({ method: 'GET', url: `/api/agents/${agentId}/policies?search=shadowed`, cookie: owner })).json().policies[0];
    expect(listed).toMatchObject({ mode: 'shadow', shadowSince: since.toISOString() });
    const before = await stateOf(agentId);

    const res = await h.request({ method: 'POST', url: `/api/agents/${agentId}/policies/${policy.id}/promote`, cookie: owner });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ id: policy.id, mode: 'enforce', shadowSince: null, version: 2 });
    await settle();
    const after = await stateOf(agentId);
    expect(after.versions).toBe(before.versions + 1);
    expect(after.agent!.policyVersion).toBe(before.agent!.policyVersion + 1);
    expect(h.events).toContainEqual({ kind: 'policy.changed', agentId, policyVersion: after.agent!.policyVersion });
    const versions = (await h.request({ method: 'GET', url: `/api/agents/${agentId}/policies/${policy.id}/versions`, cookie: owner })).json().versions;
    expect(versions[0]).toMatchObject({ version: 2, change: 'promote', snapshot: { policyKey: 'shadowed', mode: 'enforce' }, cedar: versions[1].cedar });

    // Enforced now: promoting again and asking for shadow results are conflicts that change nothing.
    for (const [method, url] of [['POST', `/api/agents/${agentId}/policies/${policy.id}/promote`], ['GET', `/api/agents/${agentId}/policies/${policy.id}/shadow`]] as const) {
      const again = await h.request({ method, url, cookie: owner });
      expect(again.statusCode, again.body).toBe(409);
      expect(again.json()).toMatchObject({ error: { code: 'conflict', details: { field: 'mode' } } });
    }
    await settle();
    expect((await stateOf(agentId)).versions).toBe(after.versions);
  });

  it('answers shadow results 503 when the audit service does not answer (the harness has none)', async () => {
    const policy = await seedPolicy(agentId, { mode: 'shadow', shadowSince: new Date() });
    const res = await h.request({ method: 'GET', url: `/api/agents/${agentId}/policies/${policy.id}/shadow`, cookie: owner });
    expect(res.statusCode, res.body).toBe(503);
    expect(res.json()).toMatchObject({ error: { code: 'unavailable' } });
    expect(res.body).not.toMatch(/at .*\.ts/);
  });

  it('refuses bad parameters with 400 naming the field, and unknown policies with 404', async () => {
    const policy = await seedPolicy(agentId, { mode: 'shadow', shadowSince: new Date() });
    const base = `/api/agents/${agentId}/policies`;
    for (const [url, field] of [
      [`${base}/not-a-uuid/shadow`, 'policyId'],
      [`${base}/${policy.id}/shadow?samples=0`, 'samples'],
      [`${base}/${policy.id}/shadow?samples=51`, 'samples'],
      [`${base}/${policy.id}/shadow?samples=abc`, 'samples'],
      [`${base}/${policy.id}/shadow?since=2026-01-01`, 'since'],
    ] as const) {
      const res = await h.request({ method: 'GET', url, cookie: owner });
      expect(res.statusCode, url).toBe(400);
      expect(res.json(), url).toMatchObject({ error: { code: 'invalid_request' } });
      expect(JSON.stringify(res.json().error.details), url).toContain(field);
    }
    const bad = await h.request({ method: 'POST', url: `${base}/not-a-uuid/promote`, cookie: owner });
    expect(bad.statusCode).toBe(400);
    for (const [method, suffix] of [['POST', 'promote'], ['GET', 'shadow']] as const) {
      const missing = await h.request({ method, url: `${base}/${randomUUID()}/${suffix}`, cookie: owner });
      expect(missing.statusCode, suffix).toBe(404);
    }
    // A mode that is neither enforce nor shadow is refused before anything is compiled.
    const put = await h.request({ method: 'PUT', url: `${base}/${policy.id}`, cookie: owner, payload: { ...validBody, mode: 'log-only' } });
    expect(put.statusCode, put.body).toBe(400);
    expect(put.json()).toMatchObject({ error: { code: 'invalid_request', details: { field: 'mode' } } });
  });
});
