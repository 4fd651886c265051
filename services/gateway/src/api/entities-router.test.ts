import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asc } from 'drizzle-orm';
import { schema } from '@portcullis/core';
import { createApiHarness, type ApiHarness } from '../testing/index.ts';
import { createEntityStore, type EntityRecord, type EntityStore } from '../modules/entities/entity-store.ts';

interface EntityItem { id: string; name: string; attributes: Record<string, unknown>; harvestedAt: string }
interface EntityList { entities: EntityItem[]; total: number }
interface ErrorBody { error: { code: string; message: string; requestId?: string; details?: { field?: string; in?: string } } }

let h: ApiHarness;
let owner: string;
let store: EntityStore;
let agentId: string;

const REPOSITORIES: EntityRecord[] = [
  { id: 'acme/web', name: 'web', attributes: { private: false } },
  { id: 'acme/api', name: 'api', attributes: { private: false, default_branch: 'main' } },
  { id: 'acme/infra', name: 'infra', attributes: { private: true } },
  { id: 'labs/api', name: 'api', attributes: {} },
  { id: 'acme/100%_done', name: 'percent', attributes: {} },
  { id: 'acme/API-Gateway', name: 'gateway API', attributes: {} },
];

beforeAll(async () => {
  h = await createApiHarness();
  owner = await h.signIn('entities-owner@example.com');
  store = createEntityStore(h.db);
  agentId = await freshAgent();
  await store.replace({ agentId, service: 'github', type: 'repositories' }, REPOSITORIES, null);
  await store.replace({ agentId, service: 'github', type: 'teams' }, [{ id: 'acme/platform', name: 'Platform' }], null);
  await store.replace({ agentId, service: 'slack', type: 'channels' }, [{ id: 'C0001', name: 'general', attributes: { is_private: false } }], null);
});
afterAll(async () => { await h.close(); });

async function freshAgent(): Promise<string> {
  const res = await h.request({ method: 'GET', url: '/api/agents', cookie: owner });
  expect(res.statusCode).toBe(200);
  const created = await h.request({ method: 'POST', url: '/api/agents', payload: { name: 'Picker' }, cookie: owner });
  expect(created.statusCode).toBe(201);
  return (created.json() as { id: string }).id;
}

const url = (service: string, type: string, query = '', agent = agentId) => `/api/agents/${agent}/entities/${service}/${type}${query ? `?${query}` : ''}`;
const list = async (service: string, type: string, query = '', agent = agentId): Promise<EntityList> => {
  const res = await h.request({ method: 'GET', url: url(service, type, query, agent), cookie: owner });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as EntityList;
};
const snapshot = () => h.db.select().from(schema.harvestedEntities).orderBy(asc(schema.harvestedEntities.id));

describe('GET /api/agents/:id/entities/:service/:type', () => {
  it('lists the entities of one connector and type by name, then id, with their attributes', async () => {
    const body = await list('github', 'repositories');
    expect(body.total).toBe(6);
    // Same-name entities in id order.
    expect(body.entities.map((e) => [e.name, e.id])).toEqual([
      ['api', 'acme/api'], ['api', 'labs/api'], ['gateway API', 'acme/API-Gateway'], ['infra', 'acme/infra'], ['percent', 'acme/100%_done'], ['web', 'acme/web'],
    ]);
    const api = body.entities.find((e) => e.id === 'acme/api')!;
    expect(api).toEqual({ id: 'acme/api', name: 'api', attributes: { private: false, default_branch: 'main' }, harvestedAt: expect.any(String) });
    expect(new Date(api.harvestedAt).toISOString()).toBe(api.harvestedAt);
  });

  it('keeps types, connectors and agents apart', async () => {
    expect((await list('github', 'teams')).entities.map((e) => e.id)).toEqual(['acme/platform']);
    expect((await list('slack', 'channels')).entities).toEqual([{ id: 'C0001', name: 'general', attributes: { is_private: false }, harvestedAt: expect.any(String) }]);
    expect(await list('github', 'organizations')).toEqual({ entities: [], total: 0 });
    expect(await list('slack', 'users')).toEqual({ entities: [], total: 0 });
    const other = await freshAgent();
    expect(await list('github', 'repositories', '', other)).toEqual({ entities: [], total: 0 });
  });

  it('searches id or name case-insensitively; total counts the matches', async () => {
    const byName = await list('github', 'repositories', 'search=API');
    expect(byName.entities.map((e) => e.id).sort()).toEqual(['acme/API-Gateway', 'acme/api', 'labs/api']);
    expect(byName.total).toBe(3);
    const byId = await list('github', 'repositories', 'search=LABS%2F');
    expect(byId).toMatchObject({ total: 1, entities: [{ id: 'labs/api' }] });
    expect((await list('github', 'repositories', 'search=infra')).entities.map((e) => e.id)).toEqual(['acme/infra']);
    expect(await list('github', 'repositories', 'search=nothing-like-it')).toEqual({ entities: [], total: 0 });
    // An empty (or blank) search is no filter.
    expect((await list('github', 'repositories', 'search=%20%20')).total).toBe(6);
  });

  it('matches % and _ in a search literally', async () => {
    expect((await list('github', 'repositories', 'search=%25')).entities.map((e) => e.id)).toEqual(['acme/100%_done']);
    expect((await list('github', 'repositories', 'search=%25_d')).entities.map((e) => e.id)).toEqual(['acme/100%_done']);
    // As a LIKE wildcard, `_` would match the `p` of `api`.
    expect((await list('github', 'repositories', 'search=a_i')).total).toBe(0);
  });

  it('pages with limit and offset; total is the count over all pages', async () => {
    const all = (await list('github', 'repositories')).entities.map((e) => e.id);
    const pages: string[] = [];
    for (let offset = 0; offset < 6; offset += 4) {
      const page = await list('github', 'repositories', `limit=4&offset=${offset}`);
      expect(page.total).toBe(6);
      pages.push(...page.entities.map((e) => e.id));
    }
    expect(pages).toEqual(all);
    expect((await list('github', 'repositories', 'limit=2&offset=1')).entities.map((e) => e.id)).toEqual(all.slice(1, 3));
    expect(await list('github', 'repositories', 'offset=6')).toEqual({ entities: [], total: 6 });
    const searchedPage = await list('github', 'repositories', 'search=api&limit=1&offset=1');
    expect(searchedPage.total).toBe(3);
    expect(searchedPage.entities).toHaveLength(1);
  });

  it('answers 50 by default and at most 200', async () => {
    const many = await freshAgent();
    const records = Array.from({ length: 230 }, (_, i) => ({ id: `C${String(i).padStart(4, '0')}`, name: `channel-${String(i).padStart(4, '0')}` }));
    await store.replace({ agentId: many, service: 'slack', type: 'channels' }, records, null);
    const byDefault = await list('slack', 'channels', '', many);
    expect(byDefault.total).toBe(230);
    expect(byDefault.entities.map((e) => e.id)).toEqual(records.slice(0, 50).map((r) => r.id));
    const clamped = await list('slack', 'channels', 'limit=100000', many);
    expect(clamped.entities).toHaveLength(200);
    expect((await list('slack', 'channels', 'limit=200&offset=200', many)).entities.map((e) => e.id)).toEqual(records.slice(200).map((r) => r.id));
  });

  it('is documented in the OpenAPI document', async () => {
    const doc = (await h.request({ method: 'GET', url: '/api/openapi.json' })).json() as {
      paths: Record<string, Record<string, { tags?: string[]; parameters?: Array<{ name: string; in: string }> }>>;
    };
    const route = doc.paths['/api/agents/{id}/entities/{service}/{type}']?.get;
    expect(route?.tags).toEqual(['connectors']);
    expect(route?.parameters?.map((p) => `${p.in}:${p.name}`).sort()).toEqual(['path:id', 'path:service', 'path:type', 'query:limit', 'query:offset', 'query:search']);
  });
});

describe('bad requests', () => {
  /** `field: undefined`: the message names it (validation.ts reports unknown keys with `details.field` "querystring"). */
  const cases: Array<{ what: string; url: () => string; field: string | undefined; mentions?: string[] }> = [
    { what: 'an unknown service', url: () => url('myspace', 'repositories'), field: 'service', mentions: ['myspace'] },
    { what: 'a type the connector does not have', url: () => url('github', 'channels'), field: 'type', mentions: ['channels', 'repositories, organizations, teams'] },
    { what: 'a made-up type', url: () => url('slack', 'nonsense'), field: 'type', mentions: ['nonsense', 'channels, users'] },
    { what: 'an agent id that is no UUID', url: () => url('github', 'repositories', '', 'not-a-uuid'), field: 'id' },
    { what: 'limit 0', url: () => url('github', 'repositories', 'limit=0'), field: 'limit' },
    { what: 'a negative limit', url: () => url('github', 'repositories', 'limit=-5'), field: 'limit' },
    { what: 'a fractional limit', url: () => url('github', 'repositories', 'limit=1.5'), field: 'limit' },
    { what: 'a limit that is no number', url: () => url('github', 'repositories', 'limit=ten'), field: 'limit' },
    { what: 'a negative offset', url: () => url('github', 'repositories', 'offset=-1'), field: 'offset' },
    { what: 'an offset that is no number', url: () => url('github', 'repositories', 'offset=first'), field: 'offset' },
    { what: 'a search of 201 characters', url: () => url('github', 'repositories', `search=${'a'.repeat(201)}`), field: 'search' },
    { what: 'a search with control characters', url: () => url('github', 'repositories', 'search=a%00b'), field: 'search' },
    { what: 'an unknown query parameter', url: () => url('github', 'repositories', 'sort=name'), field: undefined, mentions: ['sort'] },
  ];

  it.each(cases)('$what is 400 invalid_request naming the field, and changes nothing', async ({ url: target, field, mentions }) => {
    const before = await snapshot();
    const res = await h.request({ method: 'GET', url: target(), cookie: owner });
    expect(res.statusCode, res.body).toBe(400);
    const body = res.json() as ErrorBody;
    expect(body.error.code).toBe('invalid_request');
    if (field) expect(body.error.details?.field).toBe(field);
    for (const text of mentions ?? []) expect(body.error.message).toContain(text);
    expect(res.body).not.toMatch(/at .*\.ts:\d+|ZodError|stack/i);
    expect(await snapshot()).toEqual(before);
  });

  it('a type of another connector is refused before the agent is looked up', async () => {
    const ghost = '00000000-0000-4000-8000-000000000000';
    const res = await h.request({ method: 'GET', url: url('vercel', 'repositories', '', ghost), cookie: owner });
    expect(res.statusCode).toBe(400);
    expect((res.json() as ErrorBody).error.message).toContain('teams, projects');
  });
});
