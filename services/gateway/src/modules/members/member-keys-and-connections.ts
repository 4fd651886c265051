import { and, asc, desc, inArray, isNull } from 'drizzle-orm';
import { schema, type Database } from '@portcullis/core';

const { connections, memberKeys } = schema;

export interface CurrentKey { id: string; displaySuffix: string; lastUsedAt: Date | null }
export interface ConnectionMetadata { service: string; identityInfo: Record<string, unknown>; status: 'active' | 'needs_reauth' }

/**
 * Each member's current (newest unrevoked) key and its connections' metadata — never tokens
 * or digests — in two statements whatever the number of members.
 */
export async function keysAndConnectionsOf(db: Database, memberIds: string[]): Promise<{
  currentKey: Map<string, CurrentKey>;
  connections: Map<string, ConnectionMetadata[]>;
}> {
  const currentKey = new Map<string, CurrentKey>();
  const connectionsOf = new Map<string, ConnectionMetadata[]>();
  if (memberIds.length === 0) return { currentKey, connections: connectionsOf };
  const [keys, conns] = await Promise.all([
    db.select({ id: memberKeys.id, memberId: memberKeys.memberId, displaySuffix: memberKeys.displaySuffix, lastUsedAt: memberKeys.lastUsedAt })
      .from(memberKeys)
      .where(and(inArray(memberKeys.memberId, memberIds), isNull(memberKeys.revokedAt)))
      .orderBy(desc(memberKeys.createdAt), desc(memberKeys.id)),
    db.select({ memberId: connections.memberId, service: connections.service, identityInfo: connections.identityInfo, status: connections.status })
      .from(connections)
      .where(inArray(connections.memberId, memberIds))
      .orderBy(asc(connections.service)),
  ]);
  // Keys arrive newest first: the first one per member is the current key.
  for (const k of keys) if (!currentKey.has(k.memberId)) currentKey.set(k.memberId, { id: k.id, displaySuffix: k.displaySuffix, lastUsedAt: k.lastUsedAt });
  for (const c of conns) {
    const list = connectionsOf.get(c.memberId) ?? [];
    list.push({ service: c.service, identityInfo: c.identityInfo, status: c.status });
    connectionsOf.set(c.memberId, list);
  }
  return { currentKey, connections: connectionsOf };
}
