import { describe, expect, it } from 'vitest';
import { getConnector } from '@portcullis/core';
import { WEBHOOK_SECRET_SERVICES } from '../connectors/credentials-service.ts';
import { webhookProviders } from './webhook-service.ts';
import type { StoredEntities, WebhookOutcome } from './webhook-types.ts';

const nothingStored: StoredEntities = { get: async () => new Map() };

/** One event per entity type each provider fills. */
const samples: Record<string, unknown[]> = {
  slack: [
    { type: 'event_callback', event: { type: 'channel_created', channel: { id: 'C1', name: 'c' } } },
    { type: 'event_callback', event: { type: 'team_join', user: { id: 'U1', name: 'u' } } },
  ],
  linear: [
    { action: 'create', type: 'Team', data: { id: 't', name: 'T' } },
    { action: 'create', type: 'Project', data: { id: 'p', name: 'P' } },
  ],
  stripe: [
    { type: 'account.updated', data: { object: { id: 'acct_1' } } },
    { type: 'customer.created', data: { object: { id: 'cus_1', name: 'C' } } },
    { type: 'product.created', data: { object: { id: 'prod_1', name: 'P' } } },
    { type: 'customer.subscription.created', data: { object: { id: 'sub_1', customer: 'cus_1' } } },
  ],
  huggingface: ['model', 'dataset', 'space'].map((type) => ({ event: { action: 'create', scope: 'repo' }, repo: { type, name: `o/${type}` } })),
};

const typesOf = (outcome: WebhookOutcome) => (outcome.kind === 'changes' ? outcome.changes.map((c) => c.type) : []);

describe('webhook providers', () => {
  it('exist for exactly the connectors that take a webhook secret', () => {
    expect([...webhookProviders.keys()].sort()).toEqual([...WEBHOOK_SECRET_SERVICES].sort());
  });

  it('fill exactly the catalog entity types of their connector', async () => {
    for (const [service, provider] of webhookProviders) {
      const types = new Set<string>();
      for (const payload of samples[service]!) for (const type of typesOf(await provider.interpret(payload, nothingStored))) types.add(type);
      expect([...types].sort(), service).toEqual([...getConnector(service)!.entityTypes].sort());
    }
  });
});
