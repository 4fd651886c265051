import { and, asc, count, eq, ilike, inArray, isNull, or, sql } from 'drizzle-orm';
import { schema, type Database } from '@portcullis/core';

const { harvestedEntities } = schema;

/** One harvested entity as the API shows it. */
export interface HarvestedEntity {
  /** The identifier policies match on (`acme/api`, `C123`, a team id…). */
  id: string;
  name: string;
  attributes: Record<string, unknown>;
  harvestedAt: string;
}

/** An entity as a harvest or a webhook reports it. */
export interface EntityRecord {
  id: string;
  name: string;
  attributes?: Record<string, unknown>;
}

export interface EntityAddress { agentId: string; service: string; type: string }

/** Escapes `%`, `_` and `\` so a search term is matched literally inside ILIKE. */
function likePattern(term: string): string {
  return `%${term.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/**
 * Harvested entities of agents, by (agent, connector, entity type). The one place that
 * reads and writes `harvested_entities`: harvesting at connect time, refreshes and inbound
 * webhooks all go through it.
 */
export function createEntityStore(db: Database) {
  return {
    /** Entities of one type, by name then id; `search` matches id or name, case-insensitively. */
    async list(address: EntityAddress, options: { search?: string; limit: number; offset: number }): Promise<{ entities: HarvestedEntity[]; total: number }> {
      const where = and(
        eq(harvestedEntities.agentId, address.agentId),
        eq(harvestedEntities.service, address.service),
        eq(harvestedEntities.type, address.type),
        options.search ? or(ilike(harvestedEntities.name, likePattern(options.search)), ilike(harvestedEntities.entityId, likePattern(options.search))) : undefined,
      );
      const [rows, [totalRow]] = await Promise.all([
        db.select().from(harvestedEntities).where(where)
          .orderBy(asc(harvestedEntities.name), asc(harvestedEntities.entityId))
          .limit(options.limit).offset(options.offset),
        db.select({ total: count() }).from(harvestedEntities).where(where),
      ]);
      return {
        entities: rows.map((r) => ({ id: r.entityId, name: r.name, attributes: r.attributes, harvestedAt: r.harvestedAt.toISOString() })),
        total: totalRow?.total ?? 0,
      };
    },

    /** The stored entities of one type with these ids (for merging partial updates), by id. */
    async get(address: EntityAddress, ids: string[]): Promise<Map<string, { name: string; attributes: Record<string, unknown> }>> {
      const found = new Map<string, { name: string; attributes: Record<string, unknown> }>();
      if (ids.length === 0) return found;
      const rows = await db.select({ entityId: harvestedEntities.entityId, name: harvestedEntities.name, attributes: harvestedEntities.attributes })
        .from(harvestedEntities)
        .where(and(
          eq(harvestedEntities.agentId, address.agentId), eq(harvestedEntities.service, address.service), eq(harvestedEntities.type, address.type),
          inArray(harvestedEntities.entityId, ids),
        ));
      for (const row of rows) found.set(row.entityId, { name: row.name, attributes: row.attributes });
      return found;
    },

    /** Inserts or updates entities (by id); `harvestedBy` is the member whose connection read them, null for webhooks. */
    async upsert(address: EntityAddress, records: EntityRecord[], harvestedBy: string | null): Promise<void> {
      if (records.length === 0) return;
      // One row per id, the last report winning, so a batch never conflicts with itself.
      const byId = new Map(records.map((r) => [r.id, r]));
      await db.insert(harvestedEntities).values([...byId.values()].map((r) => ({
        agentId: address.agentId, service: address.service, type: address.type,
        entityId: r.id, name: r.name, attributes: r.attributes ?? {}, harvestedBy,
      }))).onConflictDoUpdate({
        target: [harvestedEntities.agentId, harvestedEntities.service, harvestedEntities.type, harvestedEntities.entityId],
        set: { name: sql`excluded.name`, attributes: sql`excluded.attributes`, harvestedBy: sql`excluded.harvested_by`, harvestedAt: sql`now()` },
      });
    },

    /**
     * Records a full harvest of one type by one member: upserts `records` and deletes the
     * entities this member's earlier harvest reported but this one no longer does. Entities
     * other members (or webhooks) reported stay: members may see different repositories.
     */
    async replace(address: EntityAddress, records: EntityRecord[], harvestedBy: string | null): Promise<void> {
      await db.transaction(async (tx) => {
        const store = createEntityStore(tx as unknown as Database);
        const keep = new Set(records.map((r) => r.id));
        const existing = await tx.select({ entityId: harvestedEntities.entityId }).from(harvestedEntities).where(and(
          eq(harvestedEntities.agentId, address.agentId), eq(harvestedEntities.service, address.service), eq(harvestedEntities.type, address.type),
          harvestedBy === null ? isNull(harvestedEntities.harvestedBy) : eq(harvestedEntities.harvestedBy, harvestedBy),
        ));
        const gone = existing.map((e) => e.entityId).filter((id) => !keep.has(id));
        if (gone.length > 0) await store.remove(address, gone);
        await store.upsert(address, records, harvestedBy);
      });
    },

    /** Deletes entities by id (a webhook reported them removed). */
    async remove(address: EntityAddress, ids: string[]): Promise<void> {
      if (ids.length === 0) return;
      await db.delete(harvestedEntities).where(and(
        eq(harvestedEntities.agentId, address.agentId), eq(harvestedEntities.service, address.service), eq(harvestedEntities.type, address.type),
        inArray(harvestedEntities.entityId, ids),
      ));
    },
  };
}

export type EntityStore = ReturnType<typeof createEntityStore>;
