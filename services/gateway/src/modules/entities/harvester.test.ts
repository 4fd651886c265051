import { tmpdir } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { openDatabase, schema, type DatabaseHandle } from '@portcullis/core';
import { createTestDatabase, type TestDatabase } from '@portcullis/core/testing';
import { createEntityStore, type EntityStore } from './entity-store.ts';
import { first, type ConnectorHarvestPlan, type ToolHarvestPlan } from './harvest-plans.ts';
import { harvestAndStore, harvestEntities, storeHarvest, type HarvestResult } from './harvester.ts';

/**
 * The harvester's own logic (ordering, bounds, caps, paging, failure isolation, storing) over
 * a scripted connector. That the real plans read what the connectors hold is
 * `harvester.sandbox.test.ts`'s job.
 */

type Handler = (args: Record<string, unknown>) => unknown;

interface Scripted {
  call: (tool: string, args: Record<string, unknown>) => Promise<CallToolResult>;
  calls: Array<{ tool: string; args: Record<string, unknown> }>;
  maxInFlight: number;
}

const json = (body: unknown): CallToolResult => ({ content: [{ type: 'text', text: JSON.stringify(body) }] });

/** A connector whose tools answer `{items}` from handlers; a handler may return a `CallToolResult`, throw or hang. */
function scripted(handlers: Record<string, Handler>, delayMs = 0): Scripted {
  const state: Scripted = { calls: [], maxInFlight: 0, call: async () => ({ content: [] }) };
  let inFlight = 0;
  state.call = async (tool, args) => {
    state.calls.push({ tool, args });
    inFlight += 1;
    state.maxInFlight = Math.max(state.maxInFlight, inFlight);
    try {
      if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
      const handler = handlers[tool];
      if (!handler) throw new Error(`Unknown tool: ${tool}`);
      const answer = await handler(args);
      return typeof answer === 'object' && answer !== null && 'content' in answer ? answer as CallToolResult : json({ items: answer });
    } finally {
      inFlight -= 1;
    }
  };
  return state;
}

const listPlan = (type: string, tool: string, extra: Partial<ToolHarvestPlan> = {}): ToolHarvestPlan =>
  ({ kind: 'tool', type, tool, recordsAt: 'items', id: first('id'), name: first('name'), attributes: [], ...extra });

const records = (n: number, prefix = 'r') => Array.from({ length: n }, (_, i) => ({ id: `${prefix}${i + 1}`, name: `${prefix} ${i + 1}` }));
const idsOf = (result: HarvestResult, type: string) => result.types[type]?.map((r) => r.id);

describe('harvestEntities', () => {
  it('reads parents first, fans out over them and records the parent on each child', async () => {
    const connector = scripted({
      list_accounts: () => [{ id: 'acc1', name: 'One' }, { id: 'acc2', name: 'Two' }],
      list_workers: (args) => [{ id: `${String(args.account_id)}-w`, name: 'worker' }],
    });
    const plan: ConnectorHarvestPlan = {
      plans: [
        listPlan('workers', 'list_workers', { perParent: { type: 'accounts', args: (a) => ({ account_id: a.id }) }, parentAttribute: 'account_id' }),
        listPlan('accounts', 'list_accounts'),
      ],
      notHarvestable: {},
    };
    const result = await harvestEntities(connector.call, 'x', { plan });
    expect(connector.calls.map((c) => c.tool)).toEqual(['list_accounts', 'list_workers', 'list_workers']);
    expect(connector.calls.slice(1).map((c) => c.args)).toEqual([{ account_id: 'acc1' }, { account_id: 'acc2' }]);
    expect(result).toEqual({
      types: {
        accounts: [{ id: 'acc1', name: 'One', attributes: {} }, { id: 'acc2', name: 'Two', attributes: {} }],
        workers: [{ id: 'acc1-w', name: 'worker', attributes: { account_id: 'acc1' } }, { id: 'acc2-w', name: 'worker', attributes: { account_id: 'acc2' } }],
      },
      failed: {},
      partial: {},
    });
  });

  it('keeps at most `concurrency` calls in flight', async () => {
    const connector = scripted({ list_parents: () => records(12, 'p'), list_children: (args) => [{ id: `${String(args.parent)}-c` }] }, 15);
    const plan: ConnectorHarvestPlan = {
      plans: [listPlan('parents', 'list_parents'), listPlan('children', 'list_children', { perParent: { type: 'parents', args: (p) => ({ parent: p.id }) } })],
      notHarvestable: {},
    };
    const result = await harvestEntities(connector.call, 'x', { plan, concurrency: 3 });
    expect(result.types.children).toHaveLength(12);
    expect(connector.maxInFlight).toBe(3);
  });

  it('fans out over at most `maxParents` parents and says so', async () => {
    const connector = scripted({ list_parents: () => records(30, 'p'), list_children: (args) => [{ id: `${String(args.parent)}-c` }] });
    const plan: ConnectorHarvestPlan = {
      plans: [listPlan('parents', 'list_parents'), listPlan('children', 'list_children', { perParent: { type: 'parents', args: (p) => ({ parent: p.id }) } })],
      notHarvestable: {},
    };
    const result = await harvestEntities(connector.call, 'x', { plan, maxParents: 5 });
    expect(connector.calls.filter((c) => c.tool === 'list_children')).toHaveLength(5);
    expect(result.types.parents).toHaveLength(30);
    expect(result.types.children).toHaveLength(5);
    expect(result.partial).toEqual({ children: 'read for the first 5 of 30 parents' });
  });

  it('caps the records of a type and marks it partial', async () => {
    const connector = scripted({ list_things: () => records(50) });
    const result = await harvestEntities(connector.call, 'x', { plan: { plans: [listPlan('things', 'list_things')], notHarvestable: {} }, maxRecordsPerType: 10 });
    expect(idsOf(result, 'things')).toEqual(records(10).map((r) => r.id));
    expect(result.partial).toEqual({ things: 'capped at 10 records' });
  });

  it('reads numbered pages until a short one, and stops at the cap', async () => {
    const pages: Record<number, unknown[]> = { 1: records(2, 'a'), 2: records(2, 'b'), 3: records(1, 'c') };
    const connector = scripted({ list_things: (args) => pages[args.page as number] ?? [] });
    const plan: ConnectorHarvestPlan = { plans: [listPlan('things', 'list_things', { args: { q: 'x' }, page: { sizeArgument: 'perPage', size: 2, pageArgument: 'page' } })], notHarvestable: {} };
    const result = await harvestEntities(connector.call, 'x', { plan });
    expect(connector.calls.map((c) => c.args)).toEqual([1, 2, 3].map((page) => ({ q: 'x', perPage: 2, page })));
    expect(idsOf(result, 'things')).toEqual(['a1', 'a2', 'b1', 'b2', 'c1']);
    expect(result.partial).toEqual({});

    const capped = scripted({ list_things: (args) => pages[args.page as number] ?? [] });
    const cappedResult = await harvestEntities(capped.call, 'x', { plan, maxRecordsPerType: 3 });
    expect(capped.calls).toHaveLength(2);
    expect(idsOf(cappedResult, 'things')).toEqual(['a1', 'a2', 'b1']);
    expect(cappedResult.partial).toEqual({ things: 'capped at 3 records' });

    // Exactly at the cap after a full page: more may follow, so the type is partial too.
    const atCap = scripted({ list_things: (args) => pages[args.page as number] ?? [] });
    const atCapResult = await harvestEntities(atCap.call, 'x', { plan, maxRecordsPerType: 4 });
    expect(atCap.calls).toHaveLength(2);
    expect(idsOf(atCapResult, 'things')).toEqual(['a1', 'a2', 'b1', 'b2']);
    expect(atCapResult.partial).toEqual({ things: 'capped at 4 records' });
  });

  it('stops paging when a server ignores the page number', async () => {
    const connector = scripted({ list_things: () => records(2) });
    const plan: ConnectorHarvestPlan = { plans: [listPlan('things', 'list_things', { page: { sizeArgument: 'limit', size: 2, pageArgument: 'page' } })], notHarvestable: {} };
    const result = await harvestEntities(connector.call, 'x', { plan });
    expect(connector.calls).toHaveLength(2);
    expect(idsOf(result, 'things')).toEqual(['r1', 'r2']);
  });

  it('marks a full first page partial when the tool cannot page by number', async () => {
    const connector = scripted({ list_full: () => records(3), list_short: () => records(2) });
    const plan: ConnectorHarvestPlan = {
      plans: [listPlan('full', 'list_full', { page: { sizeArgument: 'limit', size: 3 } }), listPlan('short', 'list_short', { page: { sizeArgument: 'limit', size: 3 } })],
      notHarvestable: {},
    };
    const result = await harvestEntities(connector.call, 'x', { plan });
    expect(connector.calls.map((c) => c.args)).toEqual([{ limit: 3 }, { limit: 3 }]);
    expect(result.partial).toEqual({ full: 'list_full returned a full page of 3; later pages are not read' });
  });

  it('records each failing type with its reason, fails what depends on it and keeps the rest', async () => {
    const connector = scripted({
      list_ok: () => records(2),
      list_throws: () => { throw new Error('connection reset by upstream'); },
      list_is_error: () => ({ content: [{ type: 'text', text: 'Invalid arguments for tool list_is_error: missing required argument "team"' }], isError: true }),
      list_hangs: () => new Promise(() => undefined),
      list_prose: () => ({ content: [{ type: 'text', text: 'Here are your things: none.' }] }),
      list_children: () => records(1),
      list_object: () => json({ items: { id: 'one', name: 'Not a list' } }),
      list_idless: () => [{ name: 'No id' }, { title: 'Nor here' }],
    });
    const plan: ConnectorHarvestPlan = {
      plans: [
        listPlan('ok', 'list_ok'),
        listPlan('throws', 'list_throws'),
        listPlan('is_error', 'list_is_error'),
        listPlan('hangs', 'list_hangs'),
        listPlan('prose', 'list_prose'),
        listPlan('children', 'list_children', { perParent: { type: 'throws', args: () => ({}) } }),
        listPlan('missing', 'list_unknown'),
        listPlan('object', 'list_object'),
        listPlan('idless', 'list_idless'),
      ],
      notHarvestable: {},
    };
    const result = await harvestEntities(connector.call, 'x', { plan, callTimeoutMs: 100 });
    expect(result.types).toEqual({ ok: records(2).map((r) => ({ ...r, attributes: {} })) });
    expect(result.partial).toEqual({});
    expect(result.failed).toEqual({
      throws: 'connection reset by upstream',
      is_error: 'list_is_error answered an error: Invalid arguments for tool list_is_error: missing required argument "team"',
      hangs: 'list_hangs did not answer within 100 ms',
      prose: 'list_prose answered no list at "items"',
      children: 'needs throws, which failed: connection reset by upstream',
      missing: 'Unknown tool: list_unknown',
      object: 'list_object answered no list at "items"',
      idless: 'list_idless answered 2 record(s), none with an id',
    });
    expect(connector.calls.map((c) => c.tool)).not.toContain('list_children');
  });

  it('never throws, not even when the caller throws synchronously', async () => {
    const call = (() => { throw new Error('client closed'); }) as unknown as Scripted['call'];
    const result = await harvestEntities(call, 'x', { plan: { plans: [listPlan('things', 'list_things')], notHarvestable: {} } });
    expect(result).toEqual({ types: {}, failed: { things: 'client closed' }, partial: {} });
  });

  it('keeps what the other parents gave when some fanned-out calls fail, marking the type partial', async () => {
    const connector = scripted({
      list_bases: () => [{ id: 'b1' }, { id: 'b2' }, { id: 'b3' }],
      list_tables: (args) => { if (args.base === 'b2') throw new Error('base b2 is gone'); return [{ id: `${String(args.base)}/t` }]; },
    });
    const plan: ConnectorHarvestPlan = {
      plans: [listPlan('bases', 'list_bases'), listPlan('tables', 'list_tables', { perParent: { type: 'bases', args: (b) => ({ base: b.id }) } })],
      notHarvestable: {},
    };
    const result = await harvestEntities(connector.call, 'x', { plan });
    expect(idsOf(result, 'tables')).toEqual(['b1/t', 'b3/t']);
    expect(result.partial).toEqual({ tables: '1 of 3 calls failed: base b2 is gone' });

    const allFail = await harvestEntities(scripted({ list_bases: () => [{ id: 'b2' }], list_tables: () => { throw new Error('base b2 is gone'); } }).call, 'x', { plan });
    expect(allFail.failed).toEqual({ tables: 'base b2 is gone' });
    expect(idsOf(allFail, 'bases')).toEqual(['b2']);

    const noParents = await harvestEntities(scripted({ list_bases: () => [], list_tables: () => { throw new Error('never called'); } }).call, 'x', { plan });
    expect(noParents.types).toEqual({ bases: [], tables: [] });
  });

  it('derives types from attributes of others, and never reports helpers', async () => {
    const connector = scripted({
      whoami: () => ({ content: [{ type: 'text', text: JSON.stringify({ item: { login: 'alice' } }) }] }),
      list_repos: (args) => [{ id: `${String(args.owner)}/one`, owner: args.owner }, { id: 'acme/shared', owner: 'acme' }],
      list_teams: () => [{ id: 't1', org: 'acme' }, { id: 't2', org: 'acme-labs' }, { id: 't3' }],
    });
    const plan: ConnectorHarvestPlan = {
      plans: [
        listPlan('me', 'whoami', { recordsAt: 'item', single: true, id: first('login'), helper: true }),
        listPlan('teams', 'list_teams', { attributes: ['org'] }),
        { kind: 'derived', type: 'owners', from: [{ type: 'me', field: 'id' }, { type: 'teams', field: 'org' }], helper: true },
        listPlan('repos', 'list_repos', { perParent: { type: 'owners', args: (o) => ({ owner: o.id }) }, attributes: ['owner'] }),
        { kind: 'derived', type: 'orgs', from: [{ type: 'teams', field: 'org' }, { type: 'repos', field: 'owner' }] },
      ],
      notHarvestable: {},
    };
    const result = await harvestEntities(connector.call, 'x', { plan });
    expect(Object.keys(result.types).sort()).toEqual(['orgs', 'repos', 'teams']);
    expect(connector.calls.filter((c) => c.tool === 'list_repos').map((c) => c.args.owner)).toEqual(['alice', 'acme', 'acme-labs']);
    expect(idsOf(result, 'repos')).toEqual(['alice/one', 'acme/shared', 'acme/one', 'acme-labs/one']);
    expect(result.types.orgs).toEqual(['acme', 'acme-labs', 'alice'].map((id) => ({ id, name: id, attributes: {} })));

    const teamsDown = scripted({ list_teams: () => { throw new Error('teams are down'); }, whoami: () => json({ item: { login: 'alice' } }), list_repos: () => [{ id: 'alice/one', owner: 'alice' }] });
    const partial = await harvestEntities(teamsDown.call, 'x', { plan });
    expect(idsOf(partial, 'orgs')).toEqual(['alice']);
    expect(partial.partial.orgs).toContain('teams failed: teams are down');
    expect(partial.partial.repos).toBeUndefined();
    expect(partial.partial.orgs).toBeDefined();
  });

  it('makes entity records: ids as text, names defaulting to the id, scalar attributes only', async () => {
    const long = 'x'.repeat(2_000);
    const connector = scripted({
      list_things: () => [
        { id: 42, name: 'Numbered', flag: true, count: 3, nested: { a: 1 }, list: [1], text: long },
        { id: '', name: 'No id' },
        { name: 'Missing id' },
        { id: 'nameless', flag: null },
        'not an object',
        { id: 'nameless', name: 'Duplicate' },
      ],
    });
    const plan: ConnectorHarvestPlan = { plans: [listPlan('things', 'list_things', { attributes: ['flag', 'count', 'nested', 'list', 'text', 'absent'] })], notHarvestable: {} };
    const result = await harvestEntities(connector.call, 'x', { plan });
    expect(result.types.things).toEqual([
      { id: '42', name: 'Numbered', attributes: { flag: true, count: 3, text: `${'x'.repeat(499)}…` } },
      { id: 'nameless', name: 'nameless', attributes: {} },
    ]);
  });

  it('reads structuredContent and bare lists too', async () => {
    const connector = scripted({
      structured: () => ({ content: [], structuredContent: { items: [{ id: 's1' }] } }),
      bare: () => ({ content: [{ type: 'text', text: 'not json' }, { type: 'text', text: JSON.stringify([{ id: 'b1' }]) }] }),
    });
    const plan: ConnectorHarvestPlan = { plans: [listPlan('structured', 'structured'), listPlan('bare', 'bare')], notHarvestable: {} };
    const result = await harvestEntities(connector.call, 'x', { plan });
    expect(idsOf(result, 'structured')).toEqual(['s1']);
    expect(idsOf(result, 'bare')).toEqual(['b1']);
  });

  it('fails plans that depend on each other in a cycle instead of waiting forever', async () => {
    const connector = scripted({ a: () => records(1), b: () => records(1) });
    const plan: ConnectorHarvestPlan = {
      plans: [
        listPlan('a', 'a', { perParent: { type: 'b', args: () => ({}) } }),
        listPlan('b', 'b', { perParent: { type: 'a', args: () => ({}) } }),
        listPlan('c', 'a'),
      ],
      notHarvestable: {},
    };
    const result = await harvestEntities(connector.call, 'x', { plan });
    expect(result.failed.a).toContain('cycle');
    expect(result.failed.b).toContain('cycle');
    expect(idsOf(result, 'c')).toEqual(['r1']);
  });

  it('harvests nothing for a connector without a plan', async () => {
    const connector = scripted({});
    expect(await harvestEntities(connector.call, 'myspace')).toEqual({ types: {}, failed: {}, partial: {} });
    expect(connector.calls).toEqual([]);
  });
});

describe('storing a harvest', () => {
  let testDb: TestDatabase;
  let database: DatabaseHandle;
  let store: EntityStore;
  let target: { agentId: string; memberId: string; service: string };

  beforeAll(async () => {
    testDb = await createTestDatabase('harvest');
    database = await openDatabase({ DATABASE_URL: testDb.url, DATA_DIR: tmpdir() });
    store = createEntityStore(database.db);
    const [user] = await database.db.insert(schema.users).values({ email: 'harvest-owner@example.com' }).returning();
    const [agent] = await database.db.insert(schema.agents).values({ name: 'Harvested' }).returning();
    const [member] = await database.db.insert(schema.members).values({ agentId: agent!.id, userId: user!.id, email: user!.email, role: 'owner', status: 'approved' }).returning();
    target = { agentId: agent!.id, memberId: member!.id, service: 'linear' };
  });
  afterAll(async () => {
    await database?.close();
    await testDb?.drop();
  });

  const stored = async (type: string) => (await store.list({ agentId: target.agentId, service: target.service, type }, { limit: 100, offset: 0 })).entities.map((e) => e.id);

  it('replaces complete types, upserts partial ones and leaves failed ones alone', async () => {
    const plan: ConnectorHarvestPlan = {
      plans: [listPlan('teams', 'list_teams'), listPlan('projects', 'list_projects', { page: { sizeArgument: 'limit', size: 2 } })],
      notHarvestable: {},
    };
    let teams = [{ id: 'team_a' }, { id: 'team_b' }];
    let projects: unknown = [{ id: 'p1' }];
    const connector = scripted({ list_teams: () => teams, list_projects: () => projects });

    const firstHarvest = await harvestAndStore(store, target, connector.call, { plan });
    expect(firstHarvest.failed).toEqual({});
    expect(await stored('teams')).toEqual(['team_a', 'team_b']);
    expect(await stored('projects')).toEqual(['p1']);
    const [row] = await database.db.select().from(schema.harvestedEntities).limit(1);
    expect(row!.harvestedBy).toBe(target.memberId);

    // teams: complete, team_a gone → deleted. projects: a full page (partial) without p1 → p1 kept.
    teams = [{ id: 'team_b' }, { id: 'team_c' }];
    projects = [{ id: 'p2' }, { id: 'p3' }];
    const second = await harvestAndStore(store, target, connector.call, { plan });
    expect(second.partial).toHaveProperty('projects');
    expect(await stored('teams')).toEqual(['team_b', 'team_c']);
    expect(await stored('projects')).toEqual(['p1', 'p2', 'p3']);

    // teams fail now: what was stored stays; projects complete again: replaced.
    teams = { not: 'a list' } as unknown as typeof teams;
    projects = [{ id: 'p3' }];
    const third = await harvestAndStore(store, target, connector.call, { plan });
    expect(Object.keys(third.failed)).toEqual(['teams']);
    expect(await stored('teams')).toEqual(['team_b', 'team_c']);
    expect(await stored('projects')).toEqual(['p3']);
  });

  it('stores an empty complete type as empty for that member, keeping what webhooks or other members reported', async () => {
    const address = { ...target, service: 'vercel' };
    const teams = { agentId: address.agentId, service: 'vercel', type: 'teams' };
    await store.upsert(teams, [{ id: 'old', name: 'Old' }], target.memberId);
    await store.upsert(teams, [{ id: 'from-webhook', name: 'Hooked' }], null);
    await storeHarvest(store, address, { types: { teams: [] }, failed: {}, partial: {} });
    const left = await store.list(teams, { limit: 10, offset: 0 });
    expect(left.entities.map((e) => e.id)).toEqual(['from-webhook']);
  });
});
