import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACTORS, createApiHarness, HARNESS_ORIGIN, signInRoleActors, type ApiHarness, type RoleActors } from '../testing/index.ts';
import { mcpUrlOf } from './setup-router.ts';

/** GET /api/agents/:id/setup (decision 046): the external MCP URL, for every member who is not rejected. */
let h: ApiHarness;
let roles: RoleActors;
let agentId: string;

beforeAll(async () => {
  h = await createApiHarness();
  roles = await signInRoleActors(h, 'setup');
  agentId = await roles.agentWithMembers({ name: 'Setup' });
});
afterAll(async () => { await h?.close(); });

describe('GET /api/agents/:id/setup', () => {
  it.each(ACTORS)('as %s', async (actor) => {
    const res = await h.request({ method: 'GET', url: `/api/agents/${agentId}/setup`, ...(roles.cookieOf[actor] ? { cookie: roles.cookieOf[actor] } : {}) });
    const expected = { anonymous: 401, outsider: 404, rejected: 404, pending: 200, member: 200, owner: 200 }[actor];
    expect(res.statusCode, res.body).toBe(expected);
    if (expected === 200) expect(res.json()).toEqual({ mcpUrl: `${HARNESS_ORIGIN}/mcp` });
    else expect(res.body).not.toContain('/mcp');
  });

  it('an agent that does not exist is 404, a malformed id 400, both in the error shape', async () => {
    const ghost = await h.request({ method: 'GET', url: `/api/agents/${randomUUID()}/setup`, cookie: roles.cookieOf.owner! });
    expect(ghost.statusCode).toBe(404);
    expect(ghost.json()).toMatchObject({ error: { code: 'not_found', message: 'Agent not found.' } });
    const bad = await h.request({ method: 'GET', url: '/api/agents/not-a-uuid/setup', cookie: roles.cookieOf.owner! });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({ error: { code: 'invalid_request', details: { field: 'id' } } });
  });

  it('joins the public URL and /mcp whatever the trailing slashes, keeping a path prefix', () => {
    expect(mcpUrlOf('https://gate.example.com')).toBe('https://gate.example.com/mcp');
    expect(mcpUrlOf('https://gate.example.com/')).toBe('https://gate.example.com/mcp');
    expect(mcpUrlOf('https://example.com/portcullis//')).toBe('https://example.com/portcullis/mcp');
  });
});
