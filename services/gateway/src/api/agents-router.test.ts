import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eq, inArray } from 'drizzle-orm';
import { schema } from '@portcullis/core';
import { createApiHarness, type ApiHarness } from '../testing/index.ts';
import { createAgentService } from '../modules/agents/agent-service.ts';

interface Agent {
  id: string; name: string; tags: string[]; type: string; status: string; allowedServices: string[];
  key: { displaySuffix: string | null; lastUsedAt: string | null };
  membership: { id: string; role: string; status: string; memberCount: number };
  connections: Array<{ service: string; identityInfo: Record<string, unknown> }>;
  policyCount: number; createdAt: string;
}

/** Sign-in is rate limited per client IP, and every request here comes from one: raise the limits. */
const GENEROUS_SIGN_IN_LIMITS = {
  RATE_LIMIT_MAGIC_LINK_PER_ADDRESS: '100000', RATE_LIMIT_MAGIC_LINK_PER_IP: '100000', RATE_LIMIT_VERIFY_PER_IP: '100000',
};

let h: ApiHarness;
beforeAll(async () => { h = await createApiHarness(GENEROUS_SIGN_IN_LIMITS); });
afterAll(async () => { await h.close(); });

const cookies = new Map<string, Promise<string>>();
/** One sign-in per address for the whole file. */
function signIn(email: string): Promise<string> {
  const key = email.toLowerCase();
  if (!cookies.has(key)) cookies.set(key, h.signIn(email));
  return cookies.get(key)!;
}

async function userIdOf(email: string): Promise<string> {
  const [row] = await h.db.select({ id: schema.users.id }).from(schema.users).where(eq(schema.users.email, email));
  if (row) return row.id;
  const [made] = await h.db.insert(schema.users).values({ email }).returning({ id: schema.users.id });
  return made!.id;
}

/** A second member made directly in the database (the invite/join routes live elsewhere). */
async function addMember(agentId: string, email: string, status: 'pending' | 'approved' | 'rejected', role: 'owner' | 'member' = 'member') {
  const [row] = await h.db.insert(schema.members).values({ agentId, userId: await userIdOf(email), email, role, status }).returning();
  return row!;
}

async function addKey(memberId: string, displaySuffix: string, extra: { revokedAt?: Date; lastUsedAt?: Date; createdAt?: Date } = {}) {
  const [row] = await h.db.insert(schema.memberKeys).values({ memberId, keyHash: randomBytes(32).toString('hex'), displaySuffix, ...extra }).returning();
  return row!;
}

async function addConnection(memberId: string, service: string, identityInfo: Record<string, unknown>, status: 'active' | 'needs_reauth' = 'active') {
  await h.db.insert(schema.connections).values({ memberId, service, identityInfo, sealedTokens: 'sealed', status });
}

async function addPolicy(agentId: string, policyKey: string) {
  await h.db.insert(schema.policies).values({ agentId, policyKey, name: policyKey, service: 'github', effect: 'forbid', principal: { type: 'all_members' } });
}

async function createAgent(cookie: string, payload: Record<string, unknown>): Promise<Agent> {
  const res = await h.request({ method: 'POST', url: '/api/agents', payload, cookie });
  expect(res.statusCode, res.body).toBe(201);
  return res.json() as Agent;
}

async function list(cookie: string, query = ''): Promise<{ agents: Agent[]; total: number }> {
  const res = await h.request({ method: 'GET', url: `/api/agents${query}`, cookie });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as { agents: Agent[]; total: number };
}

async function agentCount(): Promise<number> {
  return (await h.db.select({ id: schema.agents.id }).from(schema.agents)).length;
}

const eventsFor = (agentId: string) => h.events.filter((e) => e.kind === 'agent.changed' && e.agentId === agentId);
/** Change events are delivered on a microtask; let them land before looking. */
const settle = () => new Promise((r) => setTimeout(r, 0));

describe('POST /api/agents', () => {
  it('creates the agent; the creator is its owner and an approved member', async () => {
    const cookie = await signIn('Creator@Example.com');
    const agent = await createAgent(cookie, { name: '  Release bot  ', tags: ['ci', 'prod', 'ci'] });
    expect(agent).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      name: 'Release bot',
      tags: ['ci', 'prod'],
      type: 'standard',
      status: 'active',
      allowedServices: [],
      defaultDecision: 'allow',
      key: { displaySuffix: null, lastUsedAt: null },
      membership: { id: expect.any(String), role: 'owner', status: 'approved', memberCount: 1 },
      connections: [],
      policyCount: 0,
      createdAt: expect.any(String),
    });
    expect(new Date(agent.createdAt).toISOString()).toBe(agent.createdAt);
    const rows = await h.db.select().from(schema.members).where(eq(schema.members.agentId, agent.id));
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ id: agent.membership.id, userId: await userIdOf('creator@example.com'), email: 'creator@example.com', role: 'owner', status: 'approved' });
    expect(rows[0]!.approvedAt).toBeInstanceOf(Date);
    const [stored] = await h.db.select().from(schema.agents).where(eq(schema.agents.id, agent.id));
    expect(stored!.createdBy).toBe(rows[0]!.userId);
  });

  it('accepts type "trusted" and no tags', async () => {
    const cookie = await signIn('creator@example.com');
    const agent = await createAgent(cookie, { name: 'Trusted', type: 'trusted' });
    expect(agent).toMatchObject({ type: 'trusted', tags: [] });
  });

  it.each([
    ['no name', { tags: [] }],
    ['empty name', { name: '' }],
    ['blank name', { name: '   ' }],
    ['201-character name', { name: 'n'.repeat(201) }],
    ['10k-character name', { name: 'n'.repeat(10_000) }],
    ['name with a NUL', { name: 'bad\u0000name' }],
    ['name of the wrong type', { name: 42 }],
    ['tags not an array', { name: 'ok', tags: 'ci' }],
    ['21 tags', { name: 'ok', tags: Array.from({ length: 21 }, (_, i) => `t${i}`) }],
    ['51-character tag', { name: 'ok', tags: ['t'.repeat(51)] }],
    ['empty tag', { name: 'ok', tags: [''] }],
    ['tag of the wrong type', { name: 'ok', tags: [1] }],
    ['unknown type', { name: 'ok', type: 'admin' }],
    ['unknown field', { name: 'ok', owner: 'someone-else' }],
    ['body is an array', [{ name: 'ok' }]],
  ])('refuses %s with 400 and creates nothing', async (_case, payload) => {
    const cookie = await signIn('creator@example.com');
    const before = await agentCount();
    const res = await h.request({ method: 'POST', url: '/api/agents', payload: payload as object, cookie });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: { code: 'invalid_request', message: expect.any(String) } });
    expect(await agentCount()).toBe(before);
  });

  it('refuses malformed JSON (400), no body (400) and an oversized body (413)', async () => {
    const cookie = await signIn('creator@example.com');
    const before = await agentCount();
    const malformed = await h.request({ method: 'POST', url: '/api/agents', payload: '{"name":', headers: { 'content-type': 'application/json' }, cookie });
    expect(malformed.statusCode).toBe(400);
    const empty = await h.request({ method: 'POST', url: '/api/agents', cookie });
    expect(empty.statusCode).toBe(400);
    const big = await h.request({ method: 'POST', url: '/api/agents', payload: { name: 'x', pad: 'x'.repeat(100_000) }, cookie });
    expect(big.statusCode).toBe(413);
    expect(big.json()).toMatchObject({ error: { code: 'payload_too_large' } });
    expect(await agentCount()).toBe(before);
  });
});

describe('GET /api/agents', () => {
  let cookie: string;
  let mine: Record<string, Agent>;
  let otherOwner: string;

  beforeAll(async () => {
    cookie = await signIn('lister@example.com');
    otherOwner = await signIn('lister-friend@example.com');
    mine = {};
    // Created in this order; createdAt is pinned below so the order does not depend on clock resolution.
    const specs: Array<[string, Record<string, unknown>]> = [
      ['alpha', { name: 'Alpha', tags: ['prod', 'ci'] }],
      ['beta', { name: 'beta', tags: ['staging'] }],
      ['gamma', { name: 'Gamma 100%_done', tags: [] }],
      ['delta', { name: 'Delta', tags: ['Production-EU'] }],
    ];
    let minute = 0;
    for (const [label, payload] of specs) {
      const agent = await createAgent(cookie, payload);
      await h.db.update(schema.agents).set({ createdAt: new Date(Date.UTC(2030, 0, 1, 0, minute++)) }).where(eq(schema.agents.id, agent.id));
      mine[label] = agent;
    }
    await h.request({ method: 'PUT', url: `/api/agents/${mine.delta!.id}/status`, payload: { status: 'disabled' }, cookie });

    // Agents of someone else: one the lister is an approved member of, one pending, one rejected, one unrelated.
    for (const [label, status] of [['memberOf', 'approved'], ['pendingAt', 'pending'], ['rejectedAt', 'rejected'], ['unrelated', undefined]] as const) {
      const agent = await createAgent(otherOwner, { name: `Friend ${label}`, tags: ['shared'] });
      await h.db.update(schema.agents).set({ createdAt: new Date(Date.UTC(2029, 0, 1, 0, minute++)) }).where(eq(schema.agents.id, agent.id));
      if (status) await addMember(agent.id, 'lister@example.com', status);
      mine[label] = agent;
    }
  });

  const names = (r: { agents: Agent[] }) => r.agents.map((a) => a.name);

  it('lists owned and member-of agents (pending included, rejected and unrelated excluded), newest first', async () => {
    const res = await list(cookie);
    expect(res.total).toBe(6);
    expect(names(res)).toEqual(['Delta', 'Gamma 100%_done', 'beta', 'Alpha', 'Friend pendingAt', 'Friend memberOf']);
  });

  it('answers exactly the spec\'s list fields', async () => {
    const { agents } = await list(cookie, '?search=alpha');
    expect(agents).toHaveLength(1);
    const item = agents[0]!;
    // The spec's fields plus `defaultDecision` (the policy set's fallback, decision 012).
    expect(Object.keys(item).sort()).toEqual(['allowedServices', 'connections', 'createdAt', 'defaultDecision', 'id', 'key', 'membership', 'name', 'policyCount', 'status', 'tags', 'type']);
    expect(Object.keys(item.key).sort()).toEqual(['displaySuffix', 'lastUsedAt']);
    expect(Object.keys(item.membership).sort()).toEqual(['id', 'memberCount', 'role', 'status']);
  });

  it('shows the caller\'s own membership on agents they are a member of', async () => {
    const { agents } = await list(cookie, '?search=friend');
    expect(agents.map((a) => [a.name, a.membership.role, a.membership.status, a.membership.memberCount])).toEqual([
      ['Friend pendingAt', 'member', 'pending', 1],
      ['Friend memberOf', 'member', 'approved', 2],
    ]);
  });

  it.each([
    ['?search=ALPHA', ['Alpha']],
    ['?search=et', ['beta']],
    ['?search=prod', ['Delta', 'Alpha']],
    ['?search=production-eu', ['Delta']],
    ['?search=shared', ['Friend pendingAt', 'Friend memberOf']],
    ['?search=%25', ['Gamma 100%_done']],
    ['?search=_', ['Gamma 100%_done']],
    ['?search=a%25_d', []],
    ['?search=%27%20OR%201%3D1%20--', []],
    ['?search=', ['Delta', 'Gamma 100%_done', 'beta', 'Alpha', 'Friend pendingAt', 'Friend memberOf']],
    ['?status=disabled', ['Delta']],
    ['?status=active', ['Gamma 100%_done', 'beta', 'Alpha', 'Friend pendingAt', 'Friend memberOf']],
    ['?role=owner', ['Delta', 'Gamma 100%_done', 'beta', 'Alpha']],
    ['?role=member', ['Friend pendingAt', 'Friend memberOf']],
    ['?role=owner&status=active&search=a', ['Gamma 100%_done', 'beta', 'Alpha']],
    ['?sortBy=name&sortDir=asc', ['Alpha', 'beta', 'Delta', 'Friend memberOf', 'Friend pendingAt', 'Gamma 100%_done']],
    ['?sortBy=name', ['Gamma 100%_done', 'Friend pendingAt', 'Friend memberOf', 'Delta', 'beta', 'Alpha']],
    ['?sortBy=createdAt&sortDir=asc', ['Friend memberOf', 'Friend pendingAt', 'Alpha', 'beta', 'Gamma 100%_done', 'Delta']],
    ['?sortBy=status&sortDir=asc', ['Gamma 100%_done', 'beta', 'Alpha', 'Friend pendingAt', 'Friend memberOf', 'Delta']],
    ['?sortBy=status&sortDir=desc', ['Delta', 'Gamma 100%_done', 'beta', 'Alpha', 'Friend pendingAt', 'Friend memberOf']],
  ])('%s', async (query, expected) => {
    const res = await list(cookie, query);
    expect(names(res)).toEqual(expected);
    expect(res.total).toBe(expected.length);
  });

  it('pages with limit and offset; total counts every match', async () => {
    const pages = [];
    for (let offset = 0; offset < 6; offset += 4) pages.push(await list(cookie, `?sortBy=name&sortDir=asc&limit=4&offset=${offset}`));
    expect(pages.map((p) => p.total)).toEqual([6, 6]);
    expect(pages.map(names)).toEqual([['Alpha', 'beta', 'Delta', 'Friend memberOf'], ['Friend pendingAt', 'Gamma 100%_done']]);
    const past = await list(cookie, '?offset=50');
    expect(past).toEqual({ agents: [], total: 6 });
    const filteredPage = await list(cookie, '?role=owner&limit=1&offset=1');
    expect(filteredPage.total).toBe(4);
    expect(names(filteredPage)).toEqual(['Gamma 100%_done']);
  });

  describe('with 105 agents', () => {
    beforeAll(async () => {
      const userId = await userIdOf('many@example.com');
      const made = await h.db.insert(schema.agents).values(Array.from({ length: 105 }, (_, i) => ({ name: `bulk ${i}` }))).returning({ id: schema.agents.id });
      await h.db.insert(schema.members).values(made.map((a) => ({ agentId: a.id, userId, email: 'many@example.com', role: 'owner' as const, status: 'approved' as const })));
    });

    it('defaults limit to 50 and clamps it to 100', async () => {
      const user = await signIn('many@example.com');
      const byDefault = await list(user);
      expect(byDefault.agents).toHaveLength(50);
      expect(byDefault.total).toBe(105);
      const clamped = await list(user, '?limit=1000');
      expect(clamped.agents).toHaveLength(100);
      const last = await list(user, '?limit=100&offset=100');
      expect(last.agents).toHaveLength(5);
    });

    it('lists a page with a fixed number of statements, whatever its size (no N+1)', async () => {
      let statements = 0;
      const counting = new Proxy(h.db, {
        get(target, prop, receiver) {
          const value = Reflect.get(target, prop, receiver) as unknown;
          if (typeof value !== 'function') return value;
          if (['select', 'insert', 'update', 'delete', 'execute'].includes(String(prop))) {
            return (...args: unknown[]) => { statements++; return (value as (...a: unknown[]) => unknown).apply(target, args); };
          }
          return (value as (...a: unknown[]) => unknown).bind(target);
        },
      });
      const service = createAgentService({ db: counting, bus: { publishChange() {} } });
      const user = { id: await userIdOf('many@example.com'), email: 'many@example.com' };
      const query = { sortBy: 'createdAt', sortDir: 'desc', limit: 1, offset: 0 } as const;
      const one = await service.list(user, query);
      const forOne = statements;
      statements = 0;
      const hundred = await service.list(user, { ...query, limit: 100 });
      expect([one.agents.length, hundred.agents.length]).toEqual([1, 100]);
      expect(forOne).toBeGreaterThan(0);
      expect(statements).toBe(forOne);
      expect(statements).toBeLessThanOrEqual(6);
    });
  });

  it.each([
    '?limit=0', '?limit=-1', '?limit=abc', '?limit=1.5', '?offset=-1', '?offset=x',
    '?status=paused', '?role=admin', '?sortBy=policyCount', '?sortBy=name;drop%20table%20agents', '?sortDir=up',
    '?unknown=1', '?search=<10k characters>', '?search=%00', '?status=active&status=disabled',
  ])('refuses %s with 400 naming the parameter', async (label) => {
    const query = label.replace('<10k characters>', 's'.repeat(10_000));
    const res = await h.request({ method: 'GET', url: `/api/agents${query}`, cookie });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: { code: 'invalid_request', details: { in: 'querystring' } } });
  });

  it('shows the caller\'s own key, connections, the approved-member count and the policy count', async () => {
    const agent = mine.alpha!;
    const friend = await addMember(agent.id, 'lister-friend@example.com', 'approved');
    await addMember(agent.id, 'waiting@example.com', 'pending');
    await addKey(agent.membership.id, 'OLD1', { createdAt: new Date(Date.UTC(2020, 0, 1)), lastUsedAt: new Date(Date.UTC(2020, 0, 2)) });
    await addKey(agent.membership.id, 'RVK1', { createdAt: new Date(Date.UTC(2031, 0, 1)), revokedAt: new Date(Date.UTC(2031, 0, 2)) });
    await addKey(agent.membership.id, 'CUR1', { createdAt: new Date(Date.UTC(2030, 5, 1)), lastUsedAt: new Date(Date.UTC(2030, 5, 2, 12)) });
    await addKey(friend.id, 'FRND');
    await addConnection(agent.membership.id, 'slack', { login: 'lister', team: 'T1' });
    await addConnection(agent.membership.id, 'github', { login: 'lister-gh' });
    await addConnection(friend.id, 'github', { login: 'friend-gh' });
    await addPolicy(agent.id, 'p1');
    await addPolicy(agent.id, 'p2');

    const [item] = (await list(cookie, '?search=alpha')).agents;
    expect(item).toMatchObject({
      key: { displaySuffix: 'CUR1', lastUsedAt: '2030-06-02T12:00:00.000Z' },
      membership: { memberCount: 2 },
      connections: [{ service: 'github', identityInfo: { login: 'lister-gh' } }, { service: 'slack', identityInfo: { login: 'lister', team: 'T1' } }],
      policyCount: 2,
    });
    const detail = await h.request({ method: 'GET', url: `/api/agents/${agent.id}`, cookie });
    expect(detail.json()).toEqual(item);

    // The friend sees their own key and connection, not the lister's.
    const [friendView] = (await list(otherOwner, '?search=alpha')).agents;
    expect(friendView).toMatchObject({
      key: { displaySuffix: 'FRND', lastUsedAt: null },
      membership: { id: friend.id, role: 'member', status: 'approved', memberCount: 2 },
      connections: [{ service: 'github', identityInfo: { login: 'friend-gh' } }],
    });
  });
});

describe('GET /api/agents/:id', () => {
  it('answers the detail in the list shape; 404 for unknown ids; 400 for malformed ids', async () => {
    const cookie = await signIn('detail@example.com');
    const agent = await createAgent(cookie, { name: 'Detail', tags: ['x'] });
    const res = await h.request({ method: 'GET', url: `/api/agents/${agent.id}`, cookie });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual(agent);
    const missing = await h.request({ method: 'GET', url: `/api/agents/${randomUUID()}`, cookie });
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toMatchObject({ error: { code: 'not_found' } });
    for (const bad of ['not-a-uuid', '1', `${agent.id}x`, "'%20OR%201=1", agent.id.toUpperCase().replace(/-/g, ''), 'x'.repeat(100)]) {
      const r = await h.request({ method: 'GET', url: `/api/agents/${bad}`, cookie });
      expect(r.statusCode, bad).toBe(400);
      expect(r.json()).toMatchObject({ error: { code: 'invalid_request', details: { in: 'params' } } });
    }
    // Past Fastify's maxParamLength (100) the router itself refuses; still our error shape.
    const huge = await h.request({ method: 'GET', url: `/api/agents/${'x'.repeat(5000)}`, cookie });
    expect(huge.statusCode).toBe(400);
    expect(huge.json()).toMatchObject({ error: { code: 'invalid_request', message: 'A path parameter is too long.' } });
    expect(huge.body).not.toContain('x'.repeat(200));
  });

  it('lets a pending member see the agent and their own pending membership', async () => {
    const owner = await signIn('detail-owner@example.com');
    const agent = await createAgent(owner, { name: 'Pending view' });
    const member = await addMember(agent.id, 'detail-pending@example.com', 'pending');
    const cookie = await signIn('detail-pending@example.com');
    const res = await h.request({ method: 'GET', url: `/api/agents/${agent.id}`, cookie });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ id: agent.id, membership: { id: member.id, role: 'member', status: 'pending', memberCount: 1 } });
  });
});

describe('owner changes', () => {
  let cookie: string;
  beforeAll(async () => { cookie = await signIn('changer@example.com'); });

  it('PUT /api/agents/:id renames and re-tags, publishing agent.changed', async () => {
    const agent = await createAgent(cookie, { name: 'Before', tags: ['a'] });
    const renamed = await h.request({ method: 'PUT', url: `/api/agents/${agent.id}`, payload: { name: ' After ' }, cookie });
    expect(renamed.statusCode).toBe(200);
    expect(renamed.json()).toMatchObject({ name: 'After', tags: ['a'] });
    const retagged = await h.request({ method: 'PUT', url: `/api/agents/${agent.id}`, payload: { tags: ['b', 'c', 'b'] }, cookie });
    expect(retagged.json()).toMatchObject({ name: 'After', tags: ['b', 'c'] });
    const both = await h.request({ method: 'PUT', url: `/api/agents/${agent.id}`, payload: { name: 'Both', tags: [] }, cookie });
    expect(both.json()).toEqual({ ...agent, name: 'Both', tags: [] });
    await settle();
    expect(eventsFor(agent.id)).toHaveLength(3);
  });

  it.each([
    ['an empty body', {}],
    ['type (not changeable)', { type: 'trusted' }],
    ['status (has its own route)', { status: 'disabled' }],
    ['an empty name', { name: '' }],
    ['a 10k-character name', { name: 'n'.repeat(10_000) }],
    ['a null name', { name: null }],
    ['too many tags', { tags: Array.from({ length: 21 }, (_, i) => `t${i}`) }],
  ])('PUT /api/agents/:id refuses %s and changes nothing', async (_case, payload) => {
    const agent = await createAgent(cookie, { name: 'Stable', tags: ['keep'] });
    const res = await h.request({ method: 'PUT', url: `/api/agents/${agent.id}`, payload, cookie });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: { code: 'invalid_request' } });
    const after = await h.request({ method: 'GET', url: `/api/agents/${agent.id}`, cookie });
    expect(after.json()).toEqual(agent);
  });

  it('PUT /api/agents/:id/status disables and re-enables without revoking keys; publishes agent.changed', async () => {
    const agent = await createAgent(cookie, { name: 'Toggle' });
    const key = await addKey(agent.membership.id, 'KEEP');
    const off = await h.request({ method: 'PUT', url: `/api/agents/${agent.id}/status`, payload: { status: 'disabled' }, cookie });
    expect(off.statusCode).toBe(200);
    expect(off.json()).toMatchObject({ status: 'disabled', key: { displaySuffix: 'KEEP' } });
    const [stored] = await h.db.select().from(schema.memberKeys).where(eq(schema.memberKeys.id, key.id));
    expect(stored!.revokedAt).toBeNull();
    const on = await h.request({ method: 'PUT', url: `/api/agents/${agent.id}/status`, payload: { status: 'active' }, cookie });
    expect(on.json()).toMatchObject({ status: 'active' });
    await settle();
    expect(eventsFor(agent.id)).toEqual([{ kind: 'agent.changed', agentId: agent.id }, { kind: 'agent.changed', agentId: agent.id }]);
    for (const payload of [{ status: 'paused' }, { status: 'ACTIVE' }, {}, { status: 'active', extra: 1 }, { status: true }]) {
      const bad = await h.request({ method: 'PUT', url: `/api/agents/${agent.id}/status`, payload, cookie });
      expect(bad.statusCode, JSON.stringify(payload)).toBe(400);
    }
  });

  it('PUT /api/agents/:id/services validates against the catalog, de-duplicates, orders by catalog; publishes agent.changed', async () => {
    const agent = await createAgent(cookie, { name: 'Services' });
    const res = await h.request({ method: 'PUT', url: `/api/agents/${agent.id}/services`, payload: { services: ['slack', 'github', 'slack', 'linear'] }, cookie });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ allowedServices: ['github', 'slack', 'linear'] });
    await settle();
    expect(eventsFor(agent.id)).toHaveLength(1);

    const unknown = await h.request({ method: 'PUT', url: `/api/agents/${agent.id}/services`, payload: { services: ['github', 'myspace'] }, cookie });
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json()).toMatchObject({ error: { code: 'invalid_request', message: expect.stringContaining('myspace'), details: { field: 'services', value: 'myspace' } } });
    for (const payload of [{ services: 'github' }, { services: [1] }, { services: ['GitHub'] }, { services: Array(65).fill('github') }, { services: ['x'.repeat(10_000)] }, {}, { services: [], extra: true }]) {
      const bad = await h.request({ method: 'PUT', url: `/api/agents/${agent.id}/services`, payload, cookie });
      expect(bad.statusCode, JSON.stringify(payload).slice(0, 80)).toBe(400);
    }
    const after = await h.request({ method: 'GET', url: `/api/agents/${agent.id}`, cookie });
    expect(after.json()).toMatchObject({ allowedServices: ['github', 'slack', 'linear'] });
    await settle();
    expect(eventsFor(agent.id)).toHaveLength(1);

    const cleared = await h.request({ method: 'PUT', url: `/api/agents/${agent.id}/services`, payload: { services: [] }, cookie });
    expect(cleared.json()).toMatchObject({ allowedServices: [] });
  });

  it('DELETE /api/agents/:id removes the agent with its members, keys, connections, policies and invites; publishes agent.changed', async () => {
    const agent = await createAgent(cookie, { name: 'Doomed' });
    const keep = await createAgent(cookie, { name: 'Survivor' });
    const member = await addMember(agent.id, 'doomed-member@example.com', 'approved');
    await addKey(agent.membership.id, 'DKEY');
    await addKey(member.id, 'MKEY');
    await addConnection(member.id, 'github', { login: 'm' });
    await addPolicy(agent.id, 'doomed-policy');
    await addPolicy(keep.id, 'kept-policy');
    await h.db.insert(schema.invites).values({ agentId: agent.id, email: 'later@example.com', expiresAt: new Date(Date.now() + 86_400_000) });
    const memberIds = [agent.membership.id, member.id];

    const res = await h.request({ method: 'DELETE', url: `/api/agents/${agent.id}`, cookie });
    expect(res.statusCode).toBe(204);
    expect(res.body).toBe('');
    await settle();
    expect(eventsFor(agent.id)).toEqual([{ kind: 'agent.changed', agentId: agent.id }]);

    expect(await h.db.select().from(schema.agents).where(eq(schema.agents.id, agent.id))).toEqual([]);
    expect(await h.db.select().from(schema.members).where(eq(schema.members.agentId, agent.id))).toEqual([]);
    expect(await h.db.select().from(schema.memberKeys).where(inArray(schema.memberKeys.memberId, memberIds))).toEqual([]);
    expect(await h.db.select().from(schema.connections).where(inArray(schema.connections.memberId, memberIds))).toEqual([]);
    expect(await h.db.select().from(schema.policies).where(eq(schema.policies.agentId, agent.id))).toEqual([]);
    expect(await h.db.select().from(schema.invites).where(eq(schema.invites.agentId, agent.id))).toEqual([]);
    expect(await h.db.select().from(schema.policies).where(eq(schema.policies.agentId, keep.id))).toHaveLength(1);

    expect((await h.request({ method: 'GET', url: `/api/agents/${agent.id}`, cookie })).statusCode).toBe(404);
    expect((await h.request({ method: 'DELETE', url: `/api/agents/${agent.id}`, cookie })).statusCode).toBe(404);
    expect((await h.request({ method: 'GET', url: `/api/agents/${keep.id}`, cookie })).statusCode).toBe(200);
  });
});

describe('GET /api/agents/:id/onboarding', () => {
  it('walks a member from approval through key and connections to ready', async () => {
    const owner = await signIn('onb-owner@example.com');
    const agent = await createAgent(owner, { name: 'Onboard' });
    await h.request({ method: 'PUT', url: `/api/agents/${agent.id}/services`, payload: { services: ['slack', 'github'] }, cookie: owner });
    const member = await addMember(agent.id, 'onb-member@example.com', 'pending');
    const cookie = await signIn('onb-member@example.com');
    const get = async () => {
      const res = await h.request({ method: 'GET', url: `/api/agents/${agent.id}/onboarding`, cookie });
      expect(res.statusCode).toBe(200);
      return res.json() as { nextStep: string; key: Record<string, unknown>; connectors: Array<Record<string, unknown>>; member: Record<string, unknown> };
    };

    expect(await get()).toEqual({
      agentId: agent.id,
      member: { id: member.id, status: 'pending', role: 'member' },
      key: { state: 'none' },
      connectors: [
        { service: 'github', label: 'GitHub', oauth: 'own_app', connected: false },
        { service: 'slack', label: 'Slack', oauth: 'own_app', connected: false },
      ],
      nextStep: 'await_approval',
    });

    await h.db.update(schema.members).set({ status: 'approved', approvedAt: new Date() }).where(eq(schema.members.id, member.id));
    expect((await get()).nextStep).toBe('generate_key');

    await addKey(member.id, 'ABCD');
    const withKey = await get();
    expect(withKey.key).toEqual({ state: 'active', displaySuffix: 'ABCD' });
    expect(withKey.nextStep).toBe('connect:github');

    await addConnection(member.id, 'github', { login: 'octo' }, 'needs_reauth');
    const reauth = await get();
    expect(reauth.connectors[0]).toEqual({ service: 'github', label: 'GitHub', oauth: 'own_app', connected: false, status: 'needs_reauth', identityInfo: { login: 'octo' } });
    expect(reauth.nextStep).toBe('connect:github');

    await h.db.update(schema.connections).set({ status: 'active' }).where(eq(schema.connections.memberId, member.id));
    expect((await get()).nextStep).toBe('connect:slack');

    await addConnection(member.id, 'slack', { login: 'octo-slack' });
    // A connection to a connector the owner has not enabled does not count, and is not listed.
    await addConnection(member.id, 'linear', { login: 'octo-linear' });
    await h.db.update(schema.memberKeys).set({ lastUsedAt: new Date(Date.UTC(2030, 0, 1)) }).where(eq(schema.memberKeys.memberId, member.id));
    const ready = await get();
    expect(ready.nextStep).toBe('ready');
    expect(ready.key).toEqual({ state: 'active', displaySuffix: 'ABCD', lastUsedAt: '2030-01-01T00:00:00.000Z' });
    expect(ready.connectors.map((c) => [c.service, c.connected, c.status])).toEqual([['github', true, 'active'], ['slack', true, 'active']]);

    // A revoked key is no key.
    await h.db.update(schema.memberKeys).set({ revokedAt: new Date() }).where(eq(schema.memberKeys.memberId, member.id));
    expect(await get()).toMatchObject({ key: { state: 'none' }, nextStep: 'generate_key' });
  });

  it('is ready at once for an owner with a key and no connectors enabled', async () => {
    const owner = await signIn('onb-solo@example.com');
    const agent = await createAgent(owner, { name: 'Solo' });
    const res = await h.request({ method: 'GET', url: `/api/agents/${agent.id}/onboarding`, cookie: owner });
    expect(res.json()).toEqual({ agentId: agent.id, member: { id: agent.membership.id, status: 'approved', role: 'owner' }, key: { state: 'none' }, connectors: [], nextStep: 'generate_key' });
    await addKey(agent.membership.id, 'OWNR');
    const after = await h.request({ method: 'GET', url: `/api/agents/${agent.id}/onboarding`, cookie: owner });
    expect(after.json()).toMatchObject({ nextStep: 'ready' });
  });
});

describe('OpenAPI', () => {
  it('documents every agents route under the "agents" tag', async () => {
    const doc = (await h.request({ method: 'GET', url: '/api/openapi.json' })).json() as { paths: Record<string, Record<string, { tags?: string[] }>> };
    const expected: Array<[string, string]> = [
      ['/api/agents', 'get'], ['/api/agents', 'post'], ['/api/agents/{id}', 'get'], ['/api/agents/{id}', 'put'], ['/api/agents/{id}', 'delete'],
      ['/api/agents/{id}/status', 'put'], ['/api/agents/{id}/services', 'put'], ['/api/agents/{id}/onboarding', 'get'],
    ];
    for (const [path, method] of expected) expect(doc.paths[path]?.[method]?.tags, `${method} ${path}`).toEqual(['agents']);
  });
});
