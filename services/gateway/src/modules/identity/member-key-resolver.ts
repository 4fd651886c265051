import { and, eq, isNull } from 'drizzle-orm';
import { digestKey, looksLikeMemberKey, schema, unwrapPrivateKey, type Bus, type Database } from '@portcullis/core';
import type { MemberContext } from './member-context.ts';
import { callerColumns, callerContextOf } from './caller-context.ts';

const { agents, memberKeys, members } = schema;

export interface MemberKeyResolver {
  /** The caller behind a presented member key, or undefined when the key is unknown or revoked. */
  resolve(presentedKey: string): Promise<MemberContext | undefined>;
  /** Writes the batched `lastUsedAt` times now (also done on a timer). */
  flushLastUsed(): Promise<void>;
  close(): Promise<void>;
}

interface CacheEntry { context: MemberContext; expiresAt: number }

/**
 * Resolves member keys by their SHA-256 digest, with a short-lived cache that change events
 * on the bus (`key.revoked`, `agent.changed`) clear at once on every replica. `lastUsedAt`
 * is kept in memory and written in batches, so a call costs no database write.
 */
export function createMemberKeyResolver(deps: { db: Database; bus: Bus; ttlMs?: number; lastUsedFlushMs?: number }): MemberKeyResolver {
  const ttlMs = deps.ttlMs ?? 30_000;
  const cache = new Map<string, CacheEntry>();
  const lastUsed = new Map<string, Date>();

  const unsubscribe = deps.bus.onChange((event) => {
    for (const [digest, entry] of cache) {
      if (event.kind === 'key.revoked' && entry.context.keyId === event.keyId) cache.delete(digest);
      else if ((event.kind === 'agent.changed' || event.kind === 'policy.changed') && entry.context.agentId === event.agentId) cache.delete(digest);
    }
  });

  async function load(presentedKey: string, digest: string): Promise<MemberContext | undefined> {
    const [row] = await deps.db
      .select({ keyId: memberKeys.id, ...callerColumns })
      .from(memberKeys)
      .innerJoin(members, eq(members.id, memberKeys.memberId))
      .innerJoin(agents, eq(agents.id, members.agentId))
      .where(and(eq(memberKeys.keyHash, digest), isNull(memberKeys.revokedAt)))
      .limit(1);
    if (!row) return undefined;
    let vaultPrivateKey;
    try {
      vaultPrivateKey = row.wrappedPrivateKey ? unwrapPrivateKey(row.memberId, row.wrappedPrivateKey, presentedKey) : undefined;
    } catch {
      vaultPrivateKey = undefined; // connections made under an older key; reset-lost clears them
    }
    return callerContextOf(deps.db, row, vaultPrivateKey);
  }

  async function flushLastUsed() {
    if (lastUsed.size === 0) return;
    const batch = [...lastUsed];
    lastUsed.clear();
    for (const [keyId, at] of batch) {
      await deps.db.update(memberKeys).set({ lastUsedAt: at }).where(eq(memberKeys.id, keyId)).catch(() => undefined);
    }
  }

  const timer = setInterval(() => { void flushLastUsed(); }, deps.lastUsedFlushMs ?? 10_000);
  timer.unref();

  return {
    async resolve(presentedKey) {
      if (!looksLikeMemberKey(presentedKey)) return undefined;
      const digest = digestKey(presentedKey);
      const now = Date.now();
      let entry = cache.get(digest);
      if (!entry || entry.expiresAt <= now) {
        const context = await load(presentedKey, digest);
        if (!context) { cache.delete(digest); return undefined; }
        entry = { context, expiresAt: now + ttlMs };
        cache.set(digest, entry);
      }
      lastUsed.set(entry.context.keyId, new Date(now));
      return entry.context;
    },
    flushLastUsed,
    async close() {
      clearInterval(timer);
      unsubscribe();
      await flushLastUsed();
    },
  };
}
