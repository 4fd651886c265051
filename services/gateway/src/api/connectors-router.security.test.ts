import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eq } from 'drizzle-orm';
import { schema } from '@portcullis/core';
import { ACTORS, createApiHarness, expectedStatus, signInRoleActors, withoutRequestId, type Actor, type ApiHarness, type RoleActors } from '../testing/index.ts';

/**
 * Every connectors route, run as anonymous, outsider, rejected member, pending member, approved
 * member and owner. Catalog routes need only a session; every credentials route is owner-only
 * (decision 006). Outsiders get the same 404 as for an agent that does not exist; nothing
 * changes unless the answer is 2xx, and no answer ever holds a secret.
 */

const CLIENT_SECRET = 'owner-client-secret-5d1e';
const WEBHOOK_SECRET = 'owner-webhook-secret-9c0f';

interface Endpoint {
  method: 'GET' | 'PUT' | 'DELETE';
  path: string;
  payload?: Record<string, unknown>;
  /** `signed-in`: any session, no agent involved. `owner`: the agent's owner only. */
  access: 'signed-in' | 'owner';
  success: number;
}

const ENDPOINTS: Endpoint[] = [
  { method: 'GET', path: '/api/connectors/meta', access: 'signed-in', success: 200 },
  { method: 'GET', path: '/api/tools/catalog', access: 'signed-in', success: 200 },
  { method: 'GET', path: '/api/tools/catalog?service=stripe', access: 'signed-in', success: 200 },
  { method: 'GET', path: '/api/agents/:id/services/credentials', access: 'owner', success: 200 },
  { method: 'PUT', path: '/api/agents/:id/services/github/credentials', payload: { clientId: 'attacker-app', clientSecret: 'attacker-secret' }, access: 'owner', success: 200 },
  { method: 'PUT', path: '/api/agents/:id/services/slack/credentials', payload: { clientId: 'attacker-app', clientSecret: 'attacker-secret', webhookSecret: 'attacker-hook' }, access: 'owner', success: 200 },
  { method: 'PUT', path: '/api/agents/:id/services/slack/credentials', payload: { clientId: 'attacker-app', clientSecret: 'attacker-secret', clearWebhookSecret: true }, access: 'owner', success: 200 },
  { method: 'DELETE', path: '/api/agents/:id/services/slack/credentials', access: 'owner', success: 204 },
];

let h: ApiHarness;
let roles: RoleActors;
let cookieOf: RoleActors['cookieOf'];

beforeAll(async () => {
  h = await createApiHarness();
  roles = await signInRoleActors(h, 'conn');
  ({ cookieOf } = roles);
});
afterAll(async () => { await h.close(); });

/** A fresh agent with slack credentials (and a webhook secret) set by its owner, and one member of each status. */
async function freshAgent(): Promise<string> {
  const agentId = await roles.agentWithMembers();
  const set = await h.request({
    method: 'PUT', url: `/api/agents/${agentId}/services/slack/credentials`, cookie: cookieOf.owner!,
    payload: { clientId: 'owner-app', clientSecret: CLIENT_SECRET, webhookSecret: WEBHOOK_SECRET },
  });
  expect(set.statusCode).toBe(200);
  return agentId;
}

const snapshot = (agentId: string) => h.db.select().from(schema.connectorCredentials).where(eq(schema.connectorCredentials.agentId, agentId)).orderBy(schema.connectorCredentials.service);

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
    for (const secret of [CLIENT_SECRET, WEBHOOK_SECRET, 'attacker-secret', 'attacker-hook', 'sb1.']) expect(res.body).not.toContain(secret);

    if (expected >= 400) {
      const body = res.json() as { error: { code: string } };
      expect(body.error.code).toBe({ 401: 'unauthenticated', 403: 'forbidden', 404: 'not_found' }[expected]);
      expect(res.body).not.toContain('owner-app');
      expect(await snapshot(agentId)).toEqual(before);
    }
    if (expected === 404) {
      const ghost = await send(randomUUID());
      expect(ghost.statusCode).toBe(404);
      expect(withoutRequestId(ghost.json())).toEqual(withoutRequestId(res.json()));
    }
    if (expected < 300 && endpoint.method === 'PUT') {
      const rows = await snapshot(agentId);
      expect(rows.map((r) => r.service)).toEqual(endpoint.path.includes('/github/') ? ['github', 'slack'] : ['slack']);
    }
    if (expected === 204) expect(await snapshot(agentId)).toEqual([]);
    if (expected === 200 && endpoint.path.endsWith('/services/credentials')) {
      expect(res.json()).toEqual({ credentials: [{ service: 'slack', configured: true, clientId: 'owner-app', hasWebhookSecret: true, updatedAt: expect.any(String) }] });
    }
  });
});

describe('a bad request from a non-owner', () => {
  it.each(['anonymous', 'outsider', 'member'] as const)('as %s is refused and stores nothing', async (actor) => {
    const agentId = await freshAgent();
    const before = await snapshot(agentId);
    const res = await h.request({
      method: 'PUT', url: `/api/agents/${agentId}/services/github/credentials`, payload: { clientId: 'x'.repeat(10_000), clientSecret: 'y', extra: true },
      ...(cookieOf[actor as Actor] ? { cookie: cookieOf[actor as Actor] } : {}),
    });
    // Anonymous callers are turned away before validation; signed-in ones learn only that the body is bad.
    expect(res.statusCode).toBe(actor === 'anonymous' ? 401 : 400);
    expect(await snapshot(agentId)).toEqual(before);
  });
});
