import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { and, eq } from 'drizzle-orm';
import { schema } from '@portcullis/core';
import { ACTORS, createApiHarness, expectedStatus, signInRoleActors, withoutRequestId, type ApiHarness, type RoleActors } from '../testing/index.ts';

/**
 * Every agents route, run as anonymous, outsider, rejected member, pending member, approved
 * member and owner. Outsiders learn nothing (the same 404 as for an id that does not exist);
 * members who know the agent get 403 on owner routes; nothing changes unless the answer is 2xx.
 */

interface Endpoint {
  method: 'GET' | 'PUT' | 'DELETE';
  path: string;
  payload?: Record<string, unknown>;
  /** `owner`: owner only. `any-member`: every non-rejected member, pending included. */
  access: 'owner' | 'any-member';
  success: number;
}

const ENDPOINTS: Endpoint[] = [
  { method: 'GET', path: '/api/agents/:id', access: 'any-member', success: 200 },
  { method: 'GET', path: '/api/agents/:id/onboarding', access: 'any-member', success: 200 },
  { method: 'PUT', path: '/api/agents/:id', payload: { name: 'Taken over', tags: ['pwned'] }, access: 'owner', success: 200 },
  { method: 'PUT', path: '/api/agents/:id/status', payload: { status: 'disabled' }, access: 'owner', success: 200 },
  { method: 'PUT', path: '/api/agents/:id/services', payload: { services: ['github', 'stripe'] }, access: 'owner', success: 200 },
  { method: 'DELETE', path: '/api/agents/:id', access: 'owner', success: 204 },
];

let h: ApiHarness;
let roles: RoleActors;
let cookieOf: RoleActors['cookieOf'];
let EMAIL: RoleActors['email'];

beforeAll(async () => {
  h = await createApiHarness();
  roles = await signInRoleActors(h, 'sec');
  ({ cookieOf, email: EMAIL } = roles);
});
afterAll(async () => { await h.close(); });

/** A fresh agent owned by `owner`, with one approved, one pending and one rejected member. */
const freshAgent = () => roles.agentWithMembers({ name: 'Guarded', tags: ['secure'] });

/** Everything a request could change about an agent. */
async function snapshot(agentId: string) {
  const agent = await h.db.select().from(schema.agents).where(eq(schema.agents.id, agentId));
  const members = await h.db.select().from(schema.members).where(eq(schema.members.agentId, agentId)).orderBy(schema.members.email);
  const events = h.events.filter((e) => 'agentId' in e && e.agentId === agentId).length;
  return { agent, members, events };
}

const settle = () => new Promise((r) => setTimeout(r, 0));

describe.each(ENDPOINTS)('$method $path', (endpoint) => {
  it.each(ACTORS)('as %s', async (actor) => {
    const agentId = await freshAgent();
    const before = await snapshot(agentId);
    const send = (id: string) => h.request({
      method: endpoint.method,
      url: endpoint.path.replace(':id', id),
      ...(endpoint.payload ? { payload: endpoint.payload } : {}),
      ...(cookieOf[actor] ? { cookie: cookieOf[actor] } : {}),
    });
    const res = await send(agentId);
    const expected = expectedStatus(actor, endpoint.access, endpoint.success);
    expect(res.statusCode, res.body).toBe(expected);

    if (expected >= 400) {
      const body = res.json() as { error: { code: string; message: string } };
      expect(body.error.code).toBe({ 401: 'unauthenticated', 403: 'forbidden', 404: 'not_found' }[expected]);
      expect(res.body).not.toContain('Guarded');
      await settle();
      expect(await snapshot(agentId)).toEqual(before);
    }
    if (expected === 404) {
      // Indistinguishable from an agent that does not exist.
      const ghost = await send(randomUUID());
      expect(ghost.statusCode).toBe(404);
      expect(withoutRequestId(ghost.json())).toEqual(withoutRequestId(res.json()));
    }
    if (expected < 300 && endpoint.method !== 'GET') {
      await settle();
      expect(h.events).toContainEqual({ kind: 'agent.changed', agentId });
    }
    if (expected === 200 && endpoint.path === '/api/agents/:id') {
      // Members see their own membership, never someone else's.
      const { membership } = res.json() as { membership: { role: string; status: string } };
      expect(membership).toMatchObject({ member: { role: 'member', status: 'approved' }, pending: { role: 'member', status: 'pending' }, owner: { role: 'owner', status: 'approved' } }[actor as 'member' | 'pending' | 'owner']);
    }
  });
});

describe('GET /api/agents', () => {
  it.each(ACTORS)('as %s lists the agent only to its non-rejected members', async (actor) => {
    const agentId = await freshAgent();
    const res = await h.request({ method: 'GET', url: '/api/agents?limit=100', ...(cookieOf[actor] ? { cookie: cookieOf[actor] } : {}) });
    if (actor === 'anonymous') {
      expect(res.statusCode).toBe(401);
      return;
    }
    expect(res.statusCode).toBe(200);
    const ids = (res.json() as { agents: Array<{ id: string }> }).agents.map((a) => a.id);
    if (actor === 'outsider' || actor === 'rejected') expect(ids).not.toContain(agentId);
    else expect(ids).toContain(agentId);
  });
});

describe('POST /api/agents', () => {
  it.each(ACTORS)('as %s', async (actor) => {
    const before = (await h.db.select({ id: schema.agents.id }).from(schema.agents)).length;
    const res = await h.request({ method: 'POST', url: '/api/agents', payload: { name: `Made by ${actor}` }, ...(cookieOf[actor] ? { cookie: cookieOf[actor] } : {}) });
    const after = (await h.db.select({ id: schema.agents.id }).from(schema.agents)).length;
    if (actor === 'anonymous') {
      expect(res.statusCode).toBe(401);
      expect(after).toBe(before);
    } else {
      expect(res.statusCode).toBe(201);
      expect(res.json()).toMatchObject({ membership: { role: 'owner', status: 'approved' } });
      expect(after).toBe(before + 1);
    }
  });
});

describe('edges of the access rules', () => {
  it('answers anonymous callers 401 before looking at parameters or bodies', async () => {
    for (const [method, url, payload] of [
      ['GET', '/api/agents/not-a-uuid', undefined],
      ['GET', '/api/agents?limit=abc', undefined],
      ['PUT', `/api/agents/${randomUUID()}`, { bogus: true }],
      ['POST', '/api/agents', { name: 42 }],
    ] as const) {
      const res = await h.request({ method, url, ...(payload ? { payload } : {}) });
      expect(res.statusCode, `${method} ${url}`).toBe(401);
    }
  });

  it('refuses an owner\'s cookie on a state change from another origin', async () => {
    const agentId = await freshAgent();
    const before = await snapshot(agentId);
    const res = await h.request({ method: 'DELETE', url: `/api/agents/${agentId}`, cookie: cookieOf.owner!, headers: { origin: 'https://evil.example' } });
    expect(res.statusCode).toBe(403);
    await settle();
    expect(await snapshot(agentId)).toEqual(before);
  });

  it('treats an owner row that is still pending as no owner', async () => {
    const agentId = await freshAgent();
    await h.db.update(schema.members).set({ role: 'owner' }).where(and(eq(schema.members.agentId, agentId), eq(schema.members.email, EMAIL.pending)));
    const res = await h.request({ method: 'PUT', url: `/api/agents/${agentId}/status`, payload: { status: 'disabled' }, cookie: cookieOf.pending! });
    expect(res.statusCode).toBe(403);
  });

  it('lets an owner of one agent do nothing to another owner\'s agent', async () => {
    const agentId = await freshAgent();
    const other = await h.request({ method: 'POST', url: '/api/agents', payload: { name: 'Outsider\'s own' }, cookie: cookieOf.outsider! });
    expect(other.statusCode).toBe(201);
    for (const endpoint of ENDPOINTS) {
      const res = await h.request({ method: endpoint.method, url: endpoint.path.replace(':id', agentId), ...(endpoint.payload ? { payload: endpoint.payload } : {}), cookie: cookieOf.outsider! });
      expect(res.statusCode, `${endpoint.method} ${endpoint.path}`).toBe(404);
    }
  });

  it('shows a member only their own key and connections, never another member\'s', async () => {
    const agentId = await freshAgent();
    const rows = await h.db.select().from(schema.members).where(eq(schema.members.agentId, agentId));
    const ownerRow = rows.find((r) => r.role === 'owner')!;
    await h.db.insert(schema.memberKeys).values({ memberId: ownerRow.id, keyHash: randomUUID(), displaySuffix: 'OWNK' });
    await h.db.insert(schema.connections).values({ memberId: ownerRow.id, service: 'github', identityInfo: { login: 'the-owner' }, sealedTokens: 'sealed' });
    for (const actor of ['member', 'pending'] as const) {
      const detail = await h.request({ method: 'GET', url: `/api/agents/${agentId}`, cookie: cookieOf[actor]! });
      expect(detail.json()).toMatchObject({ key: { displaySuffix: null }, connections: [] });
      expect(detail.body).not.toContain('OWNK');
      expect(detail.body).not.toContain('the-owner');
      const onboarding = await h.request({ method: 'GET', url: `/api/agents/${agentId}/onboarding`, cookie: cookieOf[actor]! });
      expect(onboarding.json()).toMatchObject({ key: { state: 'none' } });
      expect(onboarding.body).not.toContain('OWNK');
    }
  });
});
