import { identifyingValue, memberNamingOf, type MemberNaming } from '../tools/identifiers.ts';
import { memberNameOf } from '../tools/words.ts';
import type { SandboxEntity } from './seed-data.ts';

/** An entity with the values it can be looked up by (its id, name, number, slug…), lowercased. */
export interface StoredEntity {
  readonly entity: SandboxEntity;
  readonly aliases: ReadonlySet<string>;
}

interface Collection {
  readonly memberName: string;
  readonly naming: MemberNaming;
  readonly byId: Map<string, StoredEntity>;
}

/**
 * The in-memory data of one sandbox connector: named collections of entities, in insertion
 * order. Ids of new entities come from one counter per connector (`issue_0001`,
 * `customer_0002`…), so a run of calls always produces the same ids.
 */
export class EntityStore {
  readonly #collections = new Map<string, Collection>();
  #counter = 0;

  constructor(seed: ReadonlyMap<string, readonly SandboxEntity[]>) {
    for (const [name, entities] of seed) {
      const collection = this.#collection(name);
      for (const entity of entities) this.#put(collection, entity);
    }
  }

  /** Names of the collections this store has seen: seeded, written or looked up. */
  collectionNames(): string[] {
    return [...this.#collections.keys()];
  }

  /** The entities of a collection with their aliases; empty for an unknown collection. */
  records(collection: string): Iterable<StoredEntity> {
    return this.#collections.get(collection)?.byId.values() ?? [];
  }

  /** Copies of the entities of a collection, safe to hand out. */
  snapshot(collection: string): SandboxEntity[] {
    return [...this.records(collection)].map(({ entity }) => structuredClone(entity));
  }

  /** How arguments and fields name a member of `collection` (`issue_number` for issues). */
  namingOf(collection: string): MemberNaming {
    return this.#collection(collection).naming;
  }

  /** The singular name of a member of `collection` (`pull_request`), for messages. */
  memberNameFor(collection: string): string {
    return this.#collection(collection).memberName;
  }

  /** Adds an entity built from `fields` with the next id and number of this connector. */
  insert(collection: string, fields: Record<string, unknown>): SandboxEntity {
    const target = this.#collection(collection);
    let id: string;
    do {
      this.#counter += 1;
      id = `${target.memberName}_${String(this.#counter).padStart(4, '0')}`;
    } while (target.byId.has(id));
    const name = fields.name ?? fields.title ?? fields.displayName ?? fields.summary ?? fields.path ?? id;
    const entity: SandboxEntity = { ...fields, id, number: this.#counter, name: typeof name === 'string' ? name : id };
    this.#put(target, entity);
    return entity;
  }

  /** Merges `changes` into an entity (its id never changes); undefined when it is gone. */
  update(collection: string, id: string, changes: Record<string, unknown>): SandboxEntity | undefined {
    const target = this.#collections.get(collection);
    const current = target?.byId.get(id);
    if (!target || !current) return undefined;
    const entity: SandboxEntity = { ...current.entity, ...changes, id };
    this.#put(target, entity);
    return entity;
  }

  /** Removes an entity and returns it; undefined when it was not there. */
  remove(collection: string, id: string): SandboxEntity | undefined {
    const target = this.#collections.get(collection);
    const current = target?.byId.get(id);
    if (!target || !current) return undefined;
    target.byId.delete(id);
    return current.entity;
  }

  #collection(name: string): Collection {
    let collection = this.#collections.get(name);
    if (!collection) {
      const memberName = memberNameOf(name);
      collection = { memberName, naming: memberNamingOf(memberName), byId: new Map() };
      this.#collections.set(name, collection);
    }
    return collection;
  }

  #put(collection: Collection, entity: SandboxEntity): void {
    const aliases = new Set<string>();
    for (const [field, value] of Object.entries(entity)) {
      if (!collection.naming.isIdentifier(field)) continue;
      const alias = identifyingValue(value);
      if (alias !== undefined) aliases.add(alias);
    }
    collection.byId.set(entity.id, { entity, aliases });
  }
}
