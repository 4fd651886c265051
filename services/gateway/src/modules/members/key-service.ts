import { timingSafeEqual } from 'node:crypto';
import { and, desc, eq, isNull, or, sql } from 'drizzle-orm';
import {
  ApiError, createMemberVault, digestKey, displaySuffixOf, generateMemberKey, rewrapMemberVault, schema, VaultError,
  type Bus, type Database,
} from '@portcullis/core';
import { loadAgentAccess } from '../agents/agent-access.ts';
import type { SignedInUser } from '../auth/auth-service.ts';
import { loadSelfOrOwnerTarget, requireSelf } from './member-views.ts';
import { announceEndedSessions, endSessionsOfKeys } from '../sessions/session-registry.ts';

const { connections, memberKeys, members } = schema;

/** The answer to a key generation: the only time the key itself is ever shown. */
export interface IssuedKey { key: string; keyId: string; displaySuffix: string }

/** What happened to the member's connection vault when a key was issued. */
export type VaultOutcome =
  /** The member had no vault: one was created under the new key. */
  | 'created'
  /** `currentKey` opened the vault: it is now wrapped under the new key; connections stay readable. */
  | 'rewrapped'
  /** A new vault replaced the old one: existing connections became unreadable (`needs_reauth`). */
  | 'replaced';

function sameDigest(a: string, b: string): boolean {
  return a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));
}

/**
 * Member keys (`pcm_…`, only a SHA-256 digest stored) and the sealed connection vault that
 * hangs off them (DESIGN.md "Connection tokens").
 *
 * The vault is always wrapped under the member's newest key record (revoked or not), because
 * every issue either re-wraps it or replaces it. So "the current key" that `currentKey` must
 * match is that newest record: after an owner revoked the key, its holder can still carry
 * their connections over to a new key by presenting it.
 *
 * Connections sealed to a replaced vault cannot be told apart from readable ones by looking
 * at them (a sealed box does not name its recipient, and the server never has the member key
 * outside `/mcp`), so replacing a vault marks every existing connection `needs_reauth` in the
 * same transaction, and reset-lost clears exactly those.
 */
export function createKeyService(deps: { db: Database; bus: Pick<Bus, 'publishChange'>; now?: () => number }) {
  const { db, bus } = deps;
  const now = deps.now ?? (() => Date.now());

  return {
    /**
     * Self only (an owner gets 403 too), pending members included — their `/mcp` calls are
     * denied by policy until approval, and having the key ready shortens onboarding.
     * Revokes the previous key (announced with `key.revoked`) and issues a new one. With
     * `currentKey`: it must be the newest key (else 400 `current_key_mismatch`, nothing
     * changes) and the vault is re-wrapped. Without it an existing vault is replaced.
     */
    async issue(agentId: string, user: SignedInUser, memberId: string, currentKey: string | undefined): Promise<IssuedKey & { vault: VaultOutcome }> {
      const access = await loadAgentAccess(db, agentId, user.id);
      requireSelf(access, memberId, 'generate their key');
      const key = generateMemberKey();
      const at = new Date(now());
      const { keyId, revoked, ended, vault } = await db.transaction(async (tx) => {
        // Serialises concurrent issues for one member: each sees the other's key and vault.
        const [member] = await tx.select().from(members).where(and(eq(members.id, memberId), eq(members.agentId, agentId))).for('update');
        if (!member || member.status === 'rejected') throw new ApiError('not_found', 'Agent not found.');
        const [newest] = await tx.select({ keyHash: memberKeys.keyHash }).from(memberKeys)
          .where(eq(memberKeys.memberId, memberId))
          .orderBy(desc(memberKeys.createdAt), desc(memberKeys.id))
          .limit(1);
        if (currentKey !== undefined && (!newest || !sameDigest(newest.keyHash, digestKey(currentKey)))) {
          throw new ApiError('invalid_request', 'currentKey is not this member\'s current key; nothing was changed. Leave it out to start over with a new vault.', {
            field: 'currentKey', reason: 'current_key_mismatch',
          });
        }
        let outcome: VaultOutcome;
        let publicKey = member.vaultPublicKey;
        let wrappedPrivateKey = member.vaultWrappedPrivateKey;
        if (!publicKey || !wrappedPrivateKey) {
          ({ publicKey, wrappedPrivateKey } = createMemberVault(memberId, key));
          outcome = 'created';
        } else {
          let rewrapped: string | undefined;
          if (currentKey !== undefined) {
            try {
              rewrapped = rewrapMemberVault(memberId, wrappedPrivateKey, currentKey, key);
            } catch (err) {
              // The right key that cannot open the vault: the vault was already unreadable, so start over.
              if (!(err instanceof VaultError)) throw err;
            }
          }
          if (rewrapped) {
            wrappedPrivateKey = rewrapped;
            outcome = 'rewrapped';
          } else {
            ({ publicKey, wrappedPrivateKey } = createMemberVault(memberId, key));
            await tx.update(connections).set({ status: 'needs_reauth', updatedAt: at }).where(eq(connections.memberId, memberId));
            outcome = 'replaced';
          }
        }
        const revokedRows = await tx.update(memberKeys).set({ revokedAt: at })
          .where(and(eq(memberKeys.memberId, memberId), isNull(memberKeys.revokedAt)))
          .returning({ id: memberKeys.id });
        const [created] = await tx.insert(memberKeys).values({
          memberId, keyHash: digestKey(key), displaySuffix: displaySuffixOf(key), createdAt: at,
        }).returning({ id: memberKeys.id });
        await tx.update(members).set({ vaultPublicKey: publicKey, vaultWrappedPrivateKey: wrappedPrivateKey }).where(eq(members.id, memberId));
        const revoked = revokedRows.map((r) => r.id);
        // The replaced key's tool sessions end with it.
        return { keyId: created!.id, revoked, ended: await endSessionsOfKeys(tx, revoked, 'key_rotated', at), vault: outcome };
      });
      for (const id of revoked) bus.publishChange({ kind: 'key.revoked', keyId: id, agentId });
      announceEndedSessions(bus, ended);
      return { key, keyId, displaySuffix: displaySuffixOf(key), vault };
    },

    /** Self or owner: revokes the member's key (no-op when there is none), ends its tool sessions, and announces both. */
    async revoke(agentId: string, user: SignedInUser, memberId: string): Promise<void> {
      const access = await loadAgentAccess(db, agentId, user.id);
      const target = await loadSelfOrOwnerTarget(db, access, memberId, 'revoke this key');
      const at = new Date(now());
      const { revoked, ended } = await db.transaction(async (tx) => {
        const rows = await tx.update(memberKeys).set({ revokedAt: at })
          .where(and(eq(memberKeys.memberId, target.id), isNull(memberKeys.revokedAt)))
          .returning({ id: memberKeys.id });
        const ids = rows.map((r) => r.id);
        return { revoked: ids, ended: await endSessionsOfKeys(tx, ids, 'key_revoked', at) };
      });
      for (const id of revoked) bus.publishChange({ kind: 'key.revoked', keyId: id, agentId });
      announceEndedSessions(bus, ended);
    },

    /**
     * Self only: deletes the connections the member's key can no longer open — those marked
     * when their vault was replaced (or any, if the member has no vault at all) — so each can
     * be connected again. Returns the cleared connector keys.
     */
    async resetLost(agentId: string, user: SignedInUser, memberId: string): Promise<{ cleared: string[] }> {
      const access = await loadAgentAccess(db, agentId, user.id);
      requireSelf(access, memberId, 'reset their lost key');
      const noVault = sql`not exists (select 1 from ${members} where ${members.id} = ${connections.memberId} and ${members.vaultWrappedPrivateKey} is not null)`;
      const cleared = await db.delete(connections)
        .where(and(eq(connections.memberId, memberId), or(eq(connections.status, 'needs_reauth'), noVault)))
        .returning({ service: connections.service });
      if (cleared.length > 0) bus.publishChange({ kind: 'agent.changed', agentId });
      return { cleared: cleared.map((c) => c.service).sort() };
    },
  };
}

export type KeyService = ReturnType<typeof createKeyService>;
