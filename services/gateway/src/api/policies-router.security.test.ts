import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eq } from 'drizzle-orm';
import { schema } from '@portcullis/core';
import { ACTORS, createApiHarness, expectedStatus, signInRoleActors, withoutRequestId, type ApiHarness, type RoleActors } from '../testing/index.ts';

/**
 * Every policies route as anonymous, outsider, rejected, pending member, approved member and
 * owner. Owner-only throughout (decision 012): outsiders get the 404 of a missing agent,
 * members 403, and nothing changes unless the answer is 2xx. The harness has no PDP, so the
 * owner's answer to routes that compile is 503 — after every access check has passed.
 */

interface Endpoint {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  payload?: Record<string, unknown>;
  /** The owner's answer in this harness (no PDP, no audit service). */
  owner: number;
}

const body = { name: 'Guarded rule', service: 'github', effect: 'forbid', tiers: ['destructive'], principal: { type: 'all_members' } };

const ENDPOINTS: Endpoint[] = [
  { method: 'GET', path: '/api/agents/:id/policies', owner: 200 },
  { method: 'POST', path: '/api/agents/:id/policies', payload: body, owner: 503 },
  { method: 'PUT', path: '/api/agents/:id/policies/:policyId', payload: body, owner: 503 },
  { method: 'DELETE', path: '/api/agents/:id/policies/:policyId', owner: 204 },
  { method: 'POST', path: '/api/agents/:id/policies/:policyId/toggle', owner: 200 },
  { method: 'POST', path: '/api/policies/:policyId/toggle', owner: 200 },
  { method: 'GET', path: '/api/agents/:id/policies/:policyId/versions', owner: 200 },
  { method: 'POST', path: '/api/agents/:id/policies/:policyId/versions/:versionId/restore', owner: 503 },
  { method: 'POST', path: '/api/agents/:id/policies/preview', payload: body, owner: 503 },
  { method: 'POST', path: '/api/agents/:id/policies/simulate', payload: { draft: body }, owner: 503 },
  // Shadow policies (decision 062): promotion needs neither the PDP nor the audit service; the results need the audit service.
  { method: 'POST', path: '/api/agents/:id/policies/:policyId/promote', owner: 200 },
  { method: 'GET', path: '/api/agents/:id/policies/:policyId/shadow', owner: 503 },
];

let h: ApiHarness;
let roles: RoleActors;

beforeAll(async () => {
  h = await createApiHarness();
  roles = await signInRoleActors(h, 'polsec');
});
afterAll(async () => { await h.close(); });

const settle = () => new Promise((r) => setTimeout(r, 0));

/** An agent with members of every status and one policy (in shadow, so it can be promoted) with a full first version. */
async function freshAgent() {
  const agentId = await roles.agentWithMembers({ name: 'Guarded' });
  const snapshot = {
    policyKey: 'guarded-key', name: 'Guarded rule', service: 'github', effect: 'forbid', tools: [], tiers: ['destructive'], principal: { type: 'all_members' },
    conditions: {}, denyMessage: null, enabled: true, mode: 'shadow',
  };
  const [policy] = await h.db.insert(schema.policies).values({ agentId, ...snapshot, effect: 'forbid', principal: { type: 'all_members' }, mode: 'shadow', shadowSince: new Date() }).returning();
  const [version] = await h.db.insert(schema.policyVersions).values({ agentId, policyId: policy!.id, version: 1, change: 'create', snapshot, cedar: '@id("guarded-key")\nforbid (principal, action, resource);' }).returning();
  await h.db.update(schema.policies).set({ currentVersionId: version!.id }).where(eq(schema.policies.id, policy!.id));
  return { agentId, policyId: policy!.id, versionId: version!.id };
}

async function snapshotOf(agentId: string) {
  const policies = await h.db.select().from(schema.policies).where(eq(schema.policies.agentId, agentId));
  const versions = await h.db.select().from(schema.policyVersions).where(eq(schema.policyVersions.agentId, agentId));
  const [agent] = await h.db.select().from(schema.agents).where(eq(schema.agents.id, agentId));
  const events = h.events.filter((e) => 'agentId' in e && e.agentId === agentId).length;
  return { policies, versions, agent, events };
}

describe.each(ENDPOINTS)('$method $path', (endpoint) => {
  it.each(ACTORS)('as %s', async (actor) => {
    const ids = await freshAgent();
    const before = await snapshotOf(ids.agentId);
    const send = (agentId: string, policyId: string) => h.request({
      method: endpoint.method,
      url: endpoint.path.replace(':id', agentId).replace(':policyId', policyId).replace(':versionId', ids.versionId),
      ...(endpoint.payload ? { payload: endpoint.payload } : {}),
      ...(roles.cookieOf[actor] ? { cookie: roles.cookieOf[actor] } : {}),
    });
    const res = await send(ids.agentId, ids.policyId);
    const expected = expectedStatus(actor, 'owner', endpoint.owner);
    expect(res.statusCode, res.body).toBe(expected);
    if (expected >= 400) {
      const error = (res.json() as { error: { code: string } }).error;
      expect(error.code).toBe({ 401: 'unauthenticated', 403: 'forbidden', 404: 'not_found', 503: 'unavailable' }[expected]);
      if (expected < 500) {
        expect(res.body).not.toContain('Guarded');
        expect(res.body).not.toContain('guarded-key');
      }
      await settle();
      expect(await snapshotOf(ids.agentId)).toEqual(before);
    }
    if (expected === 404) {
      // Indistinguishable from an agent (or policy) that does not exist.
      const ghost = await send(randomUUID(), randomUUID());
      expect(ghost.statusCode).toBe(404);
      expect(withoutRequestId(ghost.json())).toMatchObject({ error: { code: 'not_found' } });
    }
    if (expected < 300 && endpoint.method !== 'GET') {
      await settle();
      expect(h.events).toContainEqual({ kind: 'policy.changed', agentId: ids.agentId, policyVersion: 1 });
    }
  });
});

it('answers anonymous callers 401 before looking at parameters or bodies', async () => {
  for (const [method, url, payload] of [
    ['GET', '/api/agents/not-a-uuid/policies?limit=abc', undefined],
    ['POST', `/api/agents/${randomUUID()}/policies`, { bogus: true }],
    ['POST', '/api/policies/nope/toggle', undefined],
  ] as const) {
    const res = await h.request({ method, url, ...(payload ? { payload } : {}) });
    expect(res.statusCode, `${method} ${url}`).toBe(401);
  }
});

it('an owner of another agent can do nothing to this agent\'s policies', async () => {
  const ids = await freshAgent();
  const other = await h.request({ method: 'POST', url: '/api/agents', payload: { name: 'Outsider\'s own' }, cookie: roles.cookieOf.outsider! });
  expect(other.statusCode).toBe(201);
  const before = await snapshotOf(ids.agentId);
  for (const endpoint of ENDPOINTS) {
    // The other owner's own agent id with this agent's policy: still nothing.
    for (const agentId of [ids.agentId, (other.json() as { id: string }).id]) {
      const url = endpoint.path.replace(':id', agentId).replace(':policyId', ids.policyId).replace(':versionId', ids.versionId);
      const res = await h.request({ method: endpoint.method, url, ...(endpoint.payload ? { payload: endpoint.payload } : {}), cookie: roles.cookieOf.outsider! });
      const allowedOnOwnAgent = agentId !== ids.agentId && !endpoint.path.includes(':policyId');
      if (!allowedOnOwnAgent) expect(res.statusCode, `${endpoint.method} ${url}`).toBe(404);
    }
  }
  await settle();
  expect(await snapshotOf(ids.agentId)).toEqual(before);
});
