import { and, eq, isNull, lt, or, sql } from 'drizzle-orm';
import { InvalidGrantError, InvalidTargetError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type { OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { ApiError, digestKey, looksLikeMemberKey, rewrapMemberVault, schema, VaultError, type Bus, type Database } from '@portcullis/core';
import { generateAgentToken, LIFETIME_MS, looksLikeAgentToken, type AgentTokenKind } from './agent-tokens.ts';
import type { PendingAuthorization } from './authorization-request.ts';

const { mcpOAuthConsentUses: consentUses, mcpOAuthGrants: grants, mcpOAuthTokens: tokens, memberKeys, members } = schema;

type Tx = Parameters<Parameters<Database['transaction']>[0]>[0];

/** A signed authorization request as consent answers it: its digest (`authorizationRequestDigest`) and when it stops being usable. */
export interface AnsweredRequest { digest: string; expiresAt: number }

/** The member's vault key re-wrapped from one secret to another; null stays null (no vault). */
function rewrap(memberId: string, wrapped: string | null, from: string, to: string): string | null {
  if (!wrapped) return null;
  try {
    return rewrapMemberVault(memberId, wrapped, from, to);
  } catch (err) {
    if (err instanceof VaultError) return null; // a vault made under an older key: connections stay closed, as with the key itself
    throw err;
  }
}

/**
 * Grants of Portcullis's own authorization server and their codes and tokens (decisions 052,
 * 053). Every value handed out is stored as a digest; the member's vault key travels from the
 * member key (at consent) to the code, then to each access and refresh token, wrapped under
 * the value it belongs to. Refresh tokens rotate; presenting a used one (or a used code)
 * revokes the grant. Revocations are announced with `grant.revoked`.
 */
export function createGrantStore(deps: { db: Database; bus: Pick<Bus, 'publishChange'>; now?: () => number }) {
  const { db, bus } = deps;
  const now = deps.now ?? Date.now;

  async function issue(tx: Tx, grant: { id: string; memberId: string }, from: { secret: string; wrapped: string | null }, at: number): Promise<OAuthTokens> {
    const access = generateAgentToken('access');
    const refresh = generateAgentToken('refresh');
    await tx.insert(tokens).values([
      { grantId: grant.id, kind: 'access' as const, tokenHash: digestKey(access), wrappedVaultKey: rewrap(grant.memberId, from.wrapped, from.secret, access), expiresAt: new Date(at + LIFETIME_MS.access) },
      { grantId: grant.id, kind: 'refresh' as const, tokenHash: digestKey(refresh), wrappedVaultKey: rewrap(grant.memberId, from.wrapped, from.secret, refresh), expiresAt: new Date(at + LIFETIME_MS.refresh) },
    ]);
    // Housekeeping: what expired no longer proves anything (a used refresh token is kept until it expires, to catch reuse).
    await tx.delete(tokens).where(and(eq(tokens.grantId, grant.id), lt(tokens.expiresAt, new Date(at))));
    return { access_token: access, token_type: 'Bearer', expires_in: LIFETIME_MS.access / 1000, refresh_token: refresh };
  }

  async function revokeGrantIn(tx: Tx, grantId: string, at: number): Promise<{ agentId: string } | undefined> {
    const [row] = await tx.update(grants).set({ revokedAt: new Date(at) }).where(and(eq(grants.id, grantId), isNull(grants.revokedAt))).returning({ agentId: grants.agentId });
    await tx.delete(tokens).where(and(eq(tokens.grantId, grantId), or(eq(tokens.kind, 'access'), eq(tokens.kind, 'code'))));
    // The refresh tokens stay (to refuse them by name) but no longer open the member's vault.
    await tx.update(tokens).set({ wrappedVaultKey: null }).where(eq(tokens.grantId, grantId));
    return row;
  }

  /**
   * Records that `request` has been answered (approved or denied), or refuses with 409
   * `conflict` (`request_used`) when it already was: one answer per signed request, so one
   * consent mints one code. Rows of requests past their lifetime go as answers come in.
   */
  async function answerOnce(tx: Tx, request: AnsweredRequest, at: number): Promise<void> {
    await tx.delete(consentUses).where(sql`${consentUses.requestDigest} in (
      select ${consentUses.requestDigest} from ${consentUses} where ${consentUses.expiresAt} < ${new Date(at).toISOString()}::timestamptz limit 100 for update skip locked)`);
    const [claimed] = await tx.insert(consentUses).values({ requestDigest: request.digest, usedAt: new Date(at), expiresAt: new Date(request.expiresAt) })
      .onConflictDoNothing().returning({ digest: consentUses.requestDigest });
    if (!claimed) throw new ApiError('conflict', 'This authorization request was already answered: start again from your MCP client.', { reason: 'request_used' });
  }

  function announce(grantId: string, revoked: { agentId: string } | undefined): void {
    if (revoked) bus.publishChange({ kind: 'grant.revoked', grantId, agentId: revoked.agentId });
  }

  /**
   * The live row behind a presented code or refresh token, locked, with its grant and the
   * grant's member key; refuses (invalid_grant) anything unknown, expired, of another client,
   * or whose grant, member or key is gone. A used one revokes the grant first (replay).
   */
  async function presented(tx: Tx, kind: AgentTokenKind, value: string, clientId: string, at: number) {
    if (!looksLikeAgentToken(kind, value)) throw new InvalidGrantError(`The ${kind === 'code' ? 'authorization code' : 'refresh token'} is not valid.`);
    const [row] = await tx
      .select({ token: tokens, grant: grants, memberId: members.id, keyRevokedAt: memberKeys.revokedAt })
      .from(tokens)
      .innerJoin(grants, eq(grants.id, tokens.grantId))
      .innerJoin(members, eq(members.id, grants.memberId))
      .innerJoin(memberKeys, eq(memberKeys.id, grants.keyId))
      .where(and(eq(tokens.tokenHash, digestKey(value)), eq(tokens.kind, kind)))
      .for('update', { of: tokens })
      .limit(1);
    const what = kind === 'code' ? 'authorization code' : 'refresh token';
    if (!row || row.grant.clientId !== clientId) throw new InvalidGrantError(`The ${what} is not valid.`);
    if (row.grant.revokedAt) throw new InvalidGrantError(`The ${what} was revoked.`);
    if (row.token.usedAt) {
      const revoked = await revokeGrantIn(tx, row.grant.id, at);
      return { replayed: true as const, grantId: row.grant.id, revoked };
    }
    if (row.token.expiresAt.getTime() <= at) throw new InvalidGrantError(`The ${what} expired.`);
    if (row.keyRevokedAt) throw new InvalidGrantError('The member key this grant was given with was revoked.');
    // Spent: kept to catch a replay, but no longer a key to the vault (a leaked old code or refresh token plus a dump opens nothing).
    await tx.update(tokens).set({ usedAt: new Date(at), wrappedVaultKey: null }).where(eq(tokens.id, row.token.id));
    return { replayed: false as const, ...row };
  }

  /** Runs a code or refresh exchange; a replay commits the grant's revocation, then refuses. */
  async function exchange(kind: AgentTokenKind, value: string, clientId: string, then: (row: Exclude<Awaited<ReturnType<typeof presented>>, { replayed: true }>, tx: Tx, at: number) => Promise<OAuthTokens>): Promise<OAuthTokens> {
    const at = now();
    const outcome = await db.transaction(async (tx) => {
      const row = await presented(tx, kind, value, clientId, at);
      if (row.replayed) return row;
      return { replayed: false as const, tokens: await then(row, tx, at) };
    });
    if (outcome.replayed) {
      announce(outcome.grantId, outcome.revoked);
      throw new InvalidGrantError(`This ${kind === 'code' ? 'authorization code' : 'refresh token'} was already used; the grant is revoked. Authorize again.`);
    }
    return outcome.tokens;
  }

  return {
    /**
     * Consent: the signed-in user lets the pending request's client act as their membership of
     * `agentId`, proven with their member key (decision 052). Answers the code to send back.
     */
    async consent(o: { request: PendingAuthorization; answered: AnsweredRequest; userId: string; agentId: string; memberKey: string }): Promise<string> {
      const [member] = await db.select().from(members).where(and(eq(members.agentId, o.agentId), eq(members.userId, o.userId))).limit(1);
      if (!member || member.status === 'rejected') throw new ApiError('not_found', 'Agent not found.');
      if (member.status !== 'approved') throw new ApiError('forbidden', 'Your membership of this agent is still pending approval.');
      const [key] = looksLikeMemberKey(o.memberKey)
        ? await db.select().from(memberKeys).where(and(eq(memberKeys.memberId, member.id), eq(memberKeys.keyHash, digestKey(o.memberKey)), isNull(memberKeys.revokedAt))).limit(1)
        : [];
      if (!key) throw new ApiError('invalid_request', 'That is not your current member key for this agent.', { issues: [{ path: ['memberKey'], message: 'not your current member key for this agent' }] });
      const code = generateAgentToken('code');
      const at = now();
      await db.transaction(async (tx) => {
        await answerOnce(tx, o.answered, at);
        const [grant] = await tx.insert(grants).values({ clientId: o.request.clientId, agentId: o.agentId, memberId: member.id, keyId: key.id, resource: o.request.resource }).returning({ id: grants.id });
        await tx.insert(tokens).values({
          grantId: grant!.id, kind: 'code', tokenHash: digestKey(code), codeChallenge: o.request.codeChallenge, redirectUri: o.request.redirectUri,
          wrappedVaultKey: rewrap(member.id, member.vaultWrappedPrivateKey, o.memberKey, code), expiresAt: new Date(at + LIFETIME_MS.code),
        });
      });
      return code;
    },

    /** The member declined `answered`: it can be answered no more (409 `request_used` if it already was). */
    async decline(answered: AnsweredRequest): Promise<void> {
      await db.transaction((tx) => answerOnce(tx, answered, now()));
    },

    /** The PKCE challenge a live code was issued with (the SDK's token handler checks the verifier). */
    async challengeOf(clientId: string, code: string): Promise<string> {
      if (!looksLikeAgentToken('code', code)) throw new InvalidGrantError('The authorization code is not valid.');
      const [row] = await db.select({ challenge: tokens.codeChallenge, clientId: grants.clientId })
        .from(tokens).innerJoin(grants, eq(grants.id, tokens.grantId))
        .where(and(eq(tokens.tokenHash, digestKey(code)), eq(tokens.kind, 'code'))).limit(1);
      if (!row?.challenge || row.clientId !== clientId) throw new InvalidGrantError('The authorization code is not valid.');
      return row.challenge;
    },

    exchangeCode(clientId: string, code: string, redirectUri: string | undefined, resource: URL | undefined): Promise<OAuthTokens> {
      return exchange('code', code, clientId, async (row, tx, at) => {
        if (redirectUri !== undefined && redirectUri !== row.token.redirectUri) throw new InvalidGrantError('redirect_uri differs from the one the code was issued for.');
        if (resource && resource.href !== row.grant.resource) throw new InvalidTargetError(`This authorization server issues tokens for ${row.grant.resource} only.`);
        return issue(tx, { id: row.grant.id, memberId: row.memberId }, { secret: code, wrapped: row.token.wrappedVaultKey }, at);
      });
    },

    refresh(clientId: string, refreshToken: string, resource: URL | undefined): Promise<OAuthTokens> {
      return exchange('refresh', refreshToken, clientId, async (row, tx, at) => {
        if (resource && resource.href !== row.grant.resource) throw new InvalidTargetError(`This authorization server issues tokens for ${row.grant.resource} only.`);
        return issue(tx, { id: row.grant.id, memberId: row.memberId }, { secret: refreshToken, wrapped: row.token.wrappedVaultKey }, at);
      });
    },

    /** RFC 7009: an access or refresh token of `clientId` revokes its whole grant; anything else is ignored. */
    async revokeByToken(clientId: string, value: string): Promise<void> {
      if (!looksLikeAgentToken('access', value) && !looksLikeAgentToken('refresh', value)) return;
      const [row] = await db.select({ grantId: grants.id, clientId: grants.clientId })
        .from(tokens).innerJoin(grants, eq(grants.id, tokens.grantId))
        .where(eq(tokens.tokenHash, digestKey(value))).limit(1);
      if (!row || row.clientId !== clientId) return;
      await this.revokeGrant(row.grantId);
    },

    /** Revokes a grant (idempotent); every replica drops its tokens at once. */
    async revokeGrant(grantId: string): Promise<boolean> {
      const revoked = await db.transaction((tx) => revokeGrantIn(tx, grantId, now()));
      announce(grantId, revoked);
      return Boolean(revoked);
    },

    /** Grants that still act: not revoked, their member key not revoked, with a refresh token that has not expired. */
    liveGrantCondition() {
      return and(
        isNull(grants.revokedAt),
        sql`exists (select 1 from ${memberKeys} where ${memberKeys.id} = ${grants.keyId} and ${memberKeys.revokedAt} is null)`,
        sql`exists (select 1 from ${tokens} where ${tokens.grantId} = ${grants.id} and ${tokens.kind} = 'refresh' and ${tokens.usedAt} is null and ${tokens.expiresAt} > now())`,
      );
    },
  };
}

export type GrantStore = ReturnType<typeof createGrantStore>;
