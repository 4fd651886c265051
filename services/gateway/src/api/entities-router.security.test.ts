import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asc, eq } from 'drizzle-orm';
import { schema } from '@portcullis/core';
import { ACTORS, createApiHarness, expectedStatus, signInRoleActors, withoutRequestId, type Actor, type ApiHarness, type RoleActors } from '../testing/index.ts';
import { createEntityStore } from '../modules/entities/entity-store.ts';

/**
 * The entities route run as anonymous, outsider, rejected member, pending member, approved
 * member and owner. Entity pickers serve policy authoring, so only the owner may list
 * (decision 008); outsiders get the same 404 as for an agent that does not exist; nothing
 * changes, and no answer but the owner's holds an entity.
 */

const SECRET_LOOKING_NAME = 'private-payroll-repo';

interface Endpoint { path: string; expected: string[] }

const ENDPOINTS: Endpoint[] = [
  { path: '/api/agents/:id/entities/github/repositories', expected: ['acme/api', `acme/${SECRET_LOOKING_NAME}`] },
  { path: '/api/agents/:id/entities/github/repositories?search=payroll&limit=5&offset=0', expected: [`acme/${SECRET_LOOKING_NAME}`] },
  { path: '/api/agents/:id/entities/slack/channels', expected: ['C0001'] },
  { path: '/api/agents/:id/entities/slack/users', expected: [] },
];

let h: ApiHarness;
let roles: RoleActors;
let cookieOf: RoleActors['cookieOf'];

beforeAll(async () => {
  h = await createApiHarness();
  roles = await signInRoleActors(h, 'ent');
  ({ cookieOf } = roles);
});
afterAll(async () => { await h.close(); });

/** A fresh agent with one member of each status and harvested repositories and channels. */
async function freshAgent(): Promise<string> {
  const agentId = await roles.agentWithMembers();
  const store = createEntityStore(h.db);
  await store.replace({ agentId, service: 'github', type: 'repositories' }, [{ id: 'acme/api', name: 'api' }, { id: `acme/${SECRET_LOOKING_NAME}`, name: SECRET_LOOKING_NAME, attributes: { private: true } }], null);
  await store.replace({ agentId, service: 'slack', type: 'channels' }, [{ id: 'C0001', name: 'general' }], null);
  return agentId;
}

const snapshot = (agentId: string) => h.db.select().from(schema.harvestedEntities).where(eq(schema.harvestedEntities.agentId, agentId)).orderBy(asc(schema.harvestedEntities.entityId));

describe.each(ENDPOINTS)('GET $path', (endpoint) => {
  it.each(ACTORS)('as %s', async (actor) => {
    const agentId = await freshAgent();
    const before = await snapshot(agentId);
    const send = (id: string) => h.request({ method: 'GET', url: endpoint.path.replace(':id', id), ...(cookieOf[actor] ? { cookie: cookieOf[actor] } : {}) });
    const res = await send(agentId);
    const expected = expectedStatus(actor, 'owner', 200);
    expect(res.statusCode, res.body).toBe(expected);
    expect(await snapshot(agentId)).toEqual(before);

    if (expected >= 400) {
      const body = res.json() as { error: { code: string; message: string } };
      expect(body.error.code).toBe({ 401: 'unauthenticated', 403: 'forbidden', 404: 'not_found' }[expected]);
      expect(res.body).not.toContain(SECRET_LOOKING_NAME);
      expect(res.body).not.toContain('C0001');
    }
    if (expected === 404) {
      const ghost = await send(randomUUID());
      expect(ghost.statusCode).toBe(404);
      expect(withoutRequestId(ghost.json())).toEqual(withoutRequestId(res.json()));
    }
    if (expected === 200) {
      const body = res.json() as { entities: Array<{ id: string }>; total: number };
      expect(body.entities.map((e) => e.id)).toEqual(endpoint.expected);
      expect(body.total).toBe(endpoint.expected.length);
    }
  });
});

describe('a bad request from a non-owner', () => {
  it.each(['anonymous', 'outsider', 'pending', 'member'] as const)('as %s is refused without touching the agent', async (actor) => {
    const agentId = await freshAgent();
    const before = await snapshot(agentId);
    const res = await h.request({
      method: 'GET', url: `/api/agents/${agentId}/entities/github/channels?limit=0&extra=1`,
      ...(cookieOf[actor as Actor] ? { cookie: cookieOf[actor as Actor] } : {}),
    });
    // Anonymous callers are turned away before validation; signed-in ones learn only that the request is malformed.
    expect(res.statusCode).toBe(actor === 'anonymous' ? 401 : 400);
    expect(res.body).not.toContain(SECRET_LOOKING_NAME);
    expect(await snapshot(agentId)).toEqual(before);
  });
});
