import type { Database } from '@portcullis/core';
import { createEntityStore } from '../entities/entity-store.ts';
import type { StoredEntities } from './webhook-types.ts';

/** Point reads of one agent's harvested entities of one connector, by id, through the entity store. */
export function storedEntitiesOf(db: Database, agentId: string, service: string): StoredEntities {
  const store = createEntityStore(db);
  return { get: (type, ids) => store.get({ agentId, service, type }, ids) };
}
