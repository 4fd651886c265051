import { and, eq, gt, isNotNull, isNull, lt } from 'drizzle-orm';
import { digestKey, schema, unwrapPrivateKey, type Bus, type Database } from '@portcullis/core';
import type { MemberContext } from '../modules/identity/member-context.ts';
import { callerColumns, callerContextOf } from '../modules/identity/caller-context.ts';
import { looksLikeAgentToken } from './agent-tokens.ts';

const { agents, mcpOAuthGrants: grants, mcpOAuthTokens: tokens, memberKeys, members } = schema;

export interface AgentTokenResolver {
  /** The caller behind a presented access token, or undefined when it is unknown, expired or revoked. */
  resolve(presented: string): Promise<MemberContext | undefined>;
  close(): Promise<void>;
}

interface CacheEntry { context: MemberContext; expiresAt: number }

/**
 * Resolves OAuth access tokens to the same caller context as the member key they were granted
 * with (decision 053), on the hot path's terms: per-replica memory, loaded on a miss, dropped
 * by the bus events that announce a change (`grant.revoked`, `key.revoked` of the grant's key,
 * `agent.changed`/`policy.changed` of its agent — removals, disabling, deletion); a short TTL
 * is only the safety net, and a token's own expiry always applies. `lastUsedAt` of the grant
 * is written behind, in batches.
 */
export function createAgentTokenResolver(deps: { db: Database; bus: Bus; ttlMs?: number; lastUsedFlushMs?: number; expirySweepMs?: number; now?: () => number }): AgentTokenResolver {
  const ttlMs = deps.ttlMs ?? 30_000;
  const now = deps.now ?? Date.now;
  const cache = new Map<string, CacheEntry>();
  const lastUsed = new Map<string, Date>();
  /** Counts change events, so a load that raced one is answered but not cached. */
  let generation = 0;

  const unsubscribe = deps.bus.onChange((event) => {
    generation++;
    for (const [digest, entry] of cache) {
      const { context } = entry;
      if ((event.kind === 'grant.revoked' && context.oauth?.grantId === event.grantId)
        || (event.kind === 'key.revoked' && context.keyId === event.keyId)
        || ((event.kind === 'agent.changed' || event.kind === 'policy.changed') && context.agentId === event.agentId)) cache.delete(digest);
    }
  });

  async function load(presented: string, digest: string, at: number): Promise<CacheEntry | undefined> {
    const [row] = await deps.db
      .select({ keyId: grants.keyId, grantId: grants.id, clientId: grants.clientId, tokenExpiresAt: tokens.expiresAt, wrappedVaultKey: tokens.wrappedVaultKey, ...callerColumns })
      .from(tokens)
      .innerJoin(grants, eq(grants.id, tokens.grantId))
      .innerJoin(memberKeys, eq(memberKeys.id, grants.keyId))
      .innerJoin(members, eq(members.id, grants.memberId))
      .innerJoin(agents, eq(agents.id, grants.agentId))
      .where(and(eq(tokens.tokenHash, digest), eq(tokens.kind, 'access'), gt(tokens.expiresAt, new Date(at)), isNull(grants.revokedAt), isNull(memberKeys.revokedAt)))
      .limit(1);
    if (!row) return undefined;
    let vaultPrivateKey;
    try {
      vaultPrivateKey = row.wrappedVaultKey ? unwrapPrivateKey(row.memberId, row.wrappedVaultKey, presented) : undefined;
    } catch {
      vaultPrivateKey = undefined;
    }
    const context = await callerContextOf(deps.db, row, vaultPrivateKey);
    context.oauth = { clientId: row.clientId, grantId: row.grantId };
    return { context, expiresAt: Math.min(at + ttlMs, row.tokenExpiresAt.getTime()) };
  }

  async function flushLastUsed() {
    const batch = [...lastUsed];
    lastUsed.clear();
    for (const [grantId, at] of batch) {
      await deps.db.update(grants).set({ lastUsedAt: at }).where(eq(grants.id, grantId)).catch(() => undefined);
    }
  }
  const timer = setInterval(() => { void flushLastUsed(); }, deps.lastUsedFlushMs ?? 10_000);
  timer.unref();

  /**
   * Housekeeping (decision 052): an expired code or token is no credential, so its wrapped copy
   * of the member's vault key goes — a code never exchanged sits in browser history, and a dump
   * plus that value must open nothing. The rows themselves go at the grant's next issue.
   */
  async function forgetExpired() {
    await deps.db.update(tokens).set({ wrappedVaultKey: null })
      .where(and(lt(tokens.expiresAt, new Date(now())), isNotNull(tokens.wrappedVaultKey))).catch(() => undefined);
  }
  const sweep = setInterval(() => { void forgetExpired(); }, deps.expirySweepMs ?? 60_000);
  sweep.unref();

  return {
    async resolve(presented) {
      if (!looksLikeAgentToken('access', presented)) return undefined;
      const digest = digestKey(presented);
      const at = now();
      let entry = cache.get(digest);
      if (!entry || entry.expiresAt <= at) {
        const before = generation;
        entry = await load(presented, digest, at);
        if (!entry) { cache.delete(digest); return undefined; }
        if (before === generation) cache.set(digest, entry);
      }
      lastUsed.set(entry.context.oauth!.grantId, new Date(at));
      return entry.context;
    },
    async close() {
      clearInterval(timer);
      clearInterval(sweep);
      unsubscribe();
      await flushLastUsed();
    },
  };
}
