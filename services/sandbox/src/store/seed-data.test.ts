import { connectors, resourceOf } from '@portcullis/core';
import { describe, expect, it } from 'vitest';
import { seedCollectionsOf } from './seed-data.ts';

describe('seed data', () => {
  it('gives every entity type of every connector at least one record with a unique id and a name', () => {
    for (const connector of connectors) {
      const seed = seedCollectionsOf(connector);
      expect([...seed.keys()]).toEqual(connector.entityTypes);
      for (const [type, entities] of seed) {
        expect(entities.length, `${connector.key}/${type}`).toBeGreaterThan(0);
        expect(new Set(entities.map((e) => e.id)).size, `${connector.key}/${type}`).toBe(entities.length);
        for (const entity of entities) expect(entity.name.length).toBeGreaterThan(0);
      }
    }
  });

  it('uses the ids Cedar resources are named by', () => {
    const github = seedCollectionsOf(connectors.find((c) => c.key === 'github')!);
    expect(github.get('repositories')!.map((r) => r.id)).toEqual(['acme/api', 'acme/web', 'acme/infra']);
    expect(resourceOf('github', { owner: 'acme', repo: 'api' }).id).toBe('acme/api');
    const slack = seedCollectionsOf(connectors.find((c) => c.key === 'slack')!);
    expect(slack.get('channels')![0]).toMatchObject({ id: 'C0001', name: 'general' });
    const sentry = seedCollectionsOf(connectors.find((c) => c.key === 'sentry')!);
    expect(sentry.get('projects')!.map((p) => p.id)).toContain(resourceOf('sentry', { organizationSlug: 'acme', projectSlug: 'backend' }).id);
    const airtable = seedCollectionsOf(connectors.find((c) => c.key === 'airtable')!);
    expect(airtable.get('tables')!.map((t) => t.id)).toContain(resourceOf('airtable', { baseId: 'appSales', tableId: 'tblDeals' }).id);
  });

  it('generates records for an entity type it has no table for', () => {
    const seed = seedCollectionsOf({ key: 'newcomer', entityTypes: ['widgets'] });
    expect(seed.get('widgets')).toEqual([
      { id: 'widget-1', name: 'widget 1' },
      { id: 'widget-2', name: 'widget 2' },
    ]);
  });

  it('hands out a fresh copy every time', () => {
    const github = connectors.find((c) => c.key === 'github')!;
    seedCollectionsOf(github).get('repositories')![0]!.name = 'changed';
    expect(seedCollectionsOf(github).get('repositories')![0]!.name).toBe('api');
  });
});
