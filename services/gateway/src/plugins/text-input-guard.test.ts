import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eq } from 'drizzle-orm';
import { schema } from '@portcullis/core';
import { createApiHarness, signInRoleActors, type ApiHarness, type RoleActors } from '../testing/index.ts';
import { fieldWithControlCharacter } from './text-input-guard.ts';

describe('fieldWithControlCharacter', () => {
  it.each([
    ['a NUL in a top-level string', { name: 'a\u0000b' }, 'name'],
    ['a control character deep in a body', { conditions: { args: [{ name: 'owner', value: 'x\u0007' }] } }, 'conditions.args.0.value'],
    ['a NUL in a key', { ['bad\u0000key']: 1 }, 'bad\\u0000key'],
    ['DEL', { q: '\u007f' }, 'q'],
    ['a bare string', '\u0001', ''],
  ])('finds %s', (_label, value, field) => {
    expect(fieldWithControlCharacter(value)).toBe(field);
  });

  it('lets tabs, line breaks and any printable script through', () => {
    expect(fieldWithControlCharacter({ denyMessage: 'Line one\nline two\r\n\tindented', name: 'Ops – 北京 🚀', n: 3, b: true, z: null })).toBeUndefined();
  });

  it('walks a very deeply nested body without exhausting the stack', () => {
    let deep: unknown = 'end\u0000';
    for (let i = 0; i < 200_000; i++) deep = [deep];
    expect(fieldWithControlCharacter(deep)).toMatch(/^0(\.0)*$/);
  });
});

/**
 * NUL and other control characters are refused once, at the `/api` boundary, for every route:
 * 400 `invalid_request` naming the field, and nothing changes. Before, `?search=%00` on the
 * policies list and NUL inside policy condition values reached Postgres and answered 500.
 */
describe('control characters at the /api boundary', () => {
  let h: ApiHarness;
  let roles: RoleActors;
  let agentId: string;

  beforeAll(async () => {
    h = await createApiHarness();
    roles = await signInRoleActors(h, 'ctrl');
    agentId = await roles.agentWithMembers({ name: 'Control' });
  });
  afterAll(async () => { await h.close(); });

  const owner = () => roles.cookieOf.owner!;

  it.each([
    ['search', '/api/agents/:id/policies?search=%00'],
    ['service', '/api/agents/:id/policies?service=%00'],
    ['search', '/api/agents?search=a%00b'],
    ['service', '/api/audit?service=%00'],
    ['tool', '/api/audit/export?tool=%01'],
  ])('query parameter %s in %s is refused with 400 naming it', async (field, path) => {
    const res = await h.request({ method: 'GET', url: path.replace(':id', agentId), cookie: owner() });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: { code: 'invalid_request', details: { field, in: 'querystring' } } });
    expect(res.body).not.toMatch(/at \w+ \(|postgres|SQL/i);
  });

  it('a path parameter with NUL is refused with 400', async () => {
    const res = await h.request({ method: 'GET', url: '/api/agents/%00/policies', cookie: owner() });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: { code: 'invalid_request', details: { in: 'path' } } });
  });

  it('NUL inside policy condition values is refused before anything is compiled or stored', async () => {
    const draft = {
      name: 'No acme', service: 'github', effect: 'forbid', tools: ['create_issue'], principal: { type: 'all_members' },
      conditions: { args: [{ name: 'owner', operator: 'equals', value: 'acme\u0000' }], resources: [{ type: 'repositories', ids: ['acme/\u0000infra'] }] },
    };
    for (const url of [`/api/agents/${agentId}/policies`, `/api/agents/${agentId}/policies/preview`]) {
      const res = await h.request({ method: 'POST', url, payload: draft, cookie: owner() });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({ error: { code: 'invalid_request', details: { in: 'body' } } });
      expect(res.json().error.details.field).toMatch(/^conditions\./);
    }
    expect(await h.db.select().from(schema.policies).where(eq(schema.policies.agentId, agentId))).toHaveLength(0);
  });

  it('an agent name with a control character changes nothing', async () => {
    const created = await h.request({ method: 'POST', url: '/api/agents', payload: { name: 'Evil\u0000agent' }, cookie: owner() });
    expect(created.statusCode).toBe(400);
    expect(created.json()).toMatchObject({ error: { code: 'invalid_request', details: { field: 'name', in: 'body' } } });
    const renamed = await h.request({ method: 'PUT', url: `/api/agents/${agentId}`, payload: { name: 'Bell\u0007' }, cookie: owner() });
    expect(renamed.statusCode).toBe(400);
    const [agent] = await h.db.select().from(schema.agents).where(eq(schema.agents.id, agentId));
    expect(agent!.name).toBe('Control');
    const names = (await h.db.select({ name: schema.agents.name }).from(schema.agents)).map((a) => a.name);
    expect(names.some((n) => /[\u0000-\u001f]/.test(n))).toBe(false);
  });

  it('ordinary text with line breaks and any script still goes through', async () => {
    const res = await h.request({ method: 'PUT', url: `/api/agents/${agentId}`, payload: { name: 'Ops – 北京 🚀', tags: ['équipe'] }, cookie: owner() });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ name: 'Ops – 北京 🚀' });
    await h.request({ method: 'PUT', url: `/api/agents/${agentId}`, payload: { name: 'Control' }, cookie: owner() });
  });

  it('every /api route refuses a NUL in its query and in its body the same way', async () => {
    const spec = (await h.request({ method: 'GET', url: '/api/openapi.json' })).json() as {
      paths: Record<string, Record<string, { parameters?: Array<{ in: string; name: string }> }>>;
    };
    let checked = 0;
    for (const [path, operations] of Object.entries(spec.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        const url = path.replace(/\{[^}]+\}/g, (p) => (p === '{id}' ? agentId : '00000000-0000-4000-8000-000000000000'));
        const query = (operation.parameters ?? []).find((p) => p.in === 'query');
        if (query) {
          const res = await h.request({ method: method.toUpperCase() as 'GET', url: `${url}?${query.name}=x%00`, cookie: owner() });
          expect([400, 401], `${method} ${path}?${query.name}`).toContain(res.statusCode);
          if (res.statusCode === 400) expect(res.json().error.details, `${method} ${path}`).toMatchObject({ field: query.name, in: 'querystring' });
          checked++;
        }
        // Webhooks take raw signed bytes: their parsed body is checked after the signature (webhooks-router.test.ts).
        if ((method === 'post' || method === 'put') && !path.startsWith('/api/webhooks/')) {
          const res = await h.request({ method: method.toUpperCase() as 'POST', url, payload: { ['k\u0000']: 'v' }, cookie: owner() });
          expect([400, 401], `${method} ${path} body`).toContain(res.statusCode);
          checked++;
        }
      }
    }
    expect(checked).toBeGreaterThan(30);
  });
});
