import { and, asc, count, desc, eq, gt, inArray, isNull, type SQL } from 'drizzle-orm';
import { ApiError, schema, type Bus, type Database } from '@portcullis/core';
import { loadAgentAccess, requireApproved, requireOwner, type AgentAccess } from '../agents/agent-access.ts';
import { normaliseEmail, type SignedInUser } from '../auth/auth-service.ts';
import type { Mailer } from '../mail/mailer.ts';
import { quotedForMail } from '../mail/plain-text.ts';
import { INVITE_TTL_MS, readInviteToken, signInviteToken } from './invite-tokens.ts';
import {
  loadMemberOfAgent, loadSelfOrOwnerTarget, memberSummaryOf, memberViewOf, memberViewsOf, seesInFull, type ConnectionView, type MemberSummary, type MemberView,
} from './member-views.ts';
import { announceEndedSessions, endSessionsOfKeys, keepSessionsOfRemovedMember } from '../sessions/session-registry.ts';

const { agents, connections, invites, memberKeys, members, users } = schema;

/**
 * Invites one agent may send per rolling hour. The gateway sends these e-mails to addresses
 * an owner types in, so an unbounded endpoint would be a spam relay.
 */
export const INVITES_PER_AGENT_PER_HOUR = 100;

export interface InviteView { token: string; url: string; expiresAt: string }

/** An open invite as its agent's owners see it: never its token (decision 038). */
export interface OpenInviteView {
  id: string;
  email: string;
  /** The e-mail of the user who sent it; null when that account is gone. */
  invitedBy: string | null;
  createdAt: string;
  expiresAt: string;
}

export interface MemberListQuery {
  status?: 'pending' | 'approved' | 'rejected' | undefined;
  limit: number;
  offset: number;
}

/** True for a Postgres unique violation, whether or not the driver error is wrapped by drizzle. */
export function isUniqueViolation(err: unknown): boolean {
  for (let e: unknown = err; e && typeof e === 'object'; e = (e as { cause?: unknown }).cause) {
    if ((e as { code?: unknown }).code === '23505') return true;
  }
  return false;
}

/** 400 `invalid_request` for a join token, with `details.reason` saying which check failed. */
function refusedInvite(reason: 'invalid_invite' | 'invite_expired', withdrawn = false): ApiError {
  if (reason === 'invite_expired') return new ApiError('invalid_request', 'This invite has expired; ask an owner of the agent for a new one.', { field: 'token', reason });
  return withdrawn
    ? new ApiError('invalid_request', 'This invite was withdrawn or replaced by a newer link; ask an owner of the agent for a new one.', { field: 'token', reason })
    : new ApiError('invalid_request', 'This invite link is not valid for this agent.', { field: 'token', reason });
}

/**
 * Invites, joining, and the owner's member management (approve, reject, remove). Access
 * follows `agent-access.ts`: outsiders and rejected members get 404; pending members 403 on
 * everything but their own records. Every change that a cached `/mcp` identity may depend on
 * is announced on the bus after its transaction commits: `key.revoked` per invalidated key and
 * `agent.changed`, so every replica stops honouring the old state at once.
 */
export function createMemberService(deps: {
  db: Database;
  bus: Pick<Bus, 'publishChange'>;
  mailer: Mailer;
  /** The server secret (`PORTCULLIS_SECRET`); invite tokens are signed under a key derived from it. */
  secret: string;
  /** Where the dashboard is served; invite links point at `${publicUrl}/join`. */
  publicUrl: string;
  now?: () => number;
  /** Where a notice that could not be mailed is reported (the change it reports stands). */
  logMailFailure?: (message: string, error: unknown) => void;
}) {
  const { db, bus } = deps;
  const now = deps.now ?? (() => Date.now());

  function announceRevoked(agentId: string, keyIds: string[]): void {
    for (const keyId of keyIds) bus.publishChange({ kind: 'key.revoked', keyId, agentId });
  }

  /**
   * Mails a notice about a change already made (a join, an approval): a mail server that
   * fails does not undo it, it is only reported. The agent's name is its owner's text: it
   * stays out of the subject and is quoted as defanged plain text (decision 026).
   */
  async function notify(message: { to: string; subject: string; text: string; link: string }): Promise<void> {
    try {
      await deps.mailer.send(message);
    } catch (err) {
      deps.logMailFailure?.(`could not mail "${message.subject}"`, err);
    }
  }

  /** The agent's current approved owners' addresses. */
  async function ownerEmailsOf(agentId: string): Promise<string[]> {
    const rows = await db.select({ email: members.email }).from(members)
      .where(and(eq(members.agentId, agentId), eq(members.role, 'owner'), eq(members.status, 'approved')));
    return rows.map((r) => r.email);
  }

  /**
   * Records an invite for `email` on the agent (owner checked by the caller), signs its token
   * and mails the link; the answer of POST …/invite. Refused with 409 `already_member` and 429
   * past `INVITES_PER_AGENT_PER_HOUR`; 503 when the mail cannot be sent (the row is withdrawn).
   * `replacing`: an earlier invite that is deleted once the new one was mailed (a resend), so
   * its link stops working.
   */
  async function sendInvite(access: AgentAccess, user: SignedInUser, rawEmail: string, replacing?: string): Promise<InviteView & { id: string; createdAt: string }> {
    const agentId = access.agent.id;
    const email = normaliseEmail(rawEmail);
    const [existing] = await db.select({ status: members.status }).from(members)
      .where(and(eq(members.agentId, agentId), eq(members.email, email), inArray(members.status, ['pending', 'approved'])))
      .limit(1);
    if (existing) {
      throw new ApiError('conflict', `${email} is already ${existing.status === 'pending' ? 'waiting for approval on' : 'a member of'} this agent.`, { reason: 'already_member' });
    }
    const at = now();
    const [recent] = await db.select({ n: count() }).from(invites)
      .where(and(eq(invites.agentId, agentId), gt(invites.createdAt, new Date(at - 60 * 60_000))));
    if (Number(recent?.n ?? 0) >= INVITES_PER_AGENT_PER_HOUR) {
      throw new ApiError('rate_limited', `This agent has sent ${INVITES_PER_AGENT_PER_HOUR} invites in the last hour; try again later.`, { retryAfterSeconds: 3600 });
    }
    const expiresAt = new Date(at + INVITE_TTL_MS);
    const [row] = await db.insert(invites).values({ agentId, email, invitedBy: user.id, createdAt: new Date(at), expiresAt }).returning();
    const token = signInviteToken(deps.secret, { inviteId: row!.id, agentId, email, exp: expiresAt.getTime() });
    const url = `${deps.publicUrl}/join?token=${token}`;
    try {
      // The agent's name is the inviter's text, not ours: it stays out of the subject, and the
      // body quotes it as plain text that no mail client turns into a link. The only link is the invite.
      await deps.mailer.send({
        to: email,
        subject: `${user.email} invited you to an agent on Portcullis`,
        text: `${user.email} invited you (${email}) to join an agent on Portcullis. The agent's name, as they wrote it:\n\n`
          + `    ${quotedForMail(access.agent.name)}\n\n`
          + `Open this link and sign in as ${email} to ask to join:\n${url}\n\n`
          + `An owner of the agent approves your request before you can use it. The link expires on ${expiresAt.toISOString()}.\n\n`
          + `If you do not know ${user.email} or did not expect this, ignore this message.`,
        link: url,
      });
    } catch (cause) {
      await db.delete(invites).where(eq(invites.id, row!.id));
      throw Object.assign(new ApiError('unavailable', 'The invitation e-mail could not be sent; try again shortly.'), { cause });
    }
    if (replacing !== undefined) await db.delete(invites).where(and(eq(invites.id, replacing), eq(invites.agentId, agentId), isNull(invites.consumedAt)));
    return { id: row!.id, token, url, expiresAt: expiresAt.toISOString(), createdAt: row!.createdAt.toISOString() };
  }

  /** An invite of the agent not used yet (expired or not), else 404 — the same answer for a used, withdrawn or foreign one. */
  async function unusedInvite(agentId: string, inviteId: string) {
    const [row] = await db.select().from(invites).where(and(eq(invites.id, inviteId), eq(invites.agentId, agentId), isNull(invites.consumedAt)));
    if (!row) throw new ApiError('not_found', 'Invite not found: it was used, withdrawn or replaced by a newer one.');
    return row;
  }

  /** The join itself (see `join`): checks the token and records the pending membership, in one transaction. */
  async function joinWithToken(agentId: string, user: SignedInUser, token: string): Promise<{ memberId: string; status: 'pending' }> {
    const at = now();
    const check = readInviteToken(deps.secret, token, at);
    if (!check.ok) throw refusedInvite(check.problem);
    const { payload } = check;
    if (payload.agentId !== agentId) throw refusedInvite('invalid_invite');
    if (normaliseEmail(user.email) !== payload.email) {
      throw new ApiError('forbidden', 'This invite was sent to a different e-mail address: sign in with the invited address to use it.', { reason: 'email_mismatch' });
    }
    try {
      return await db.transaction(async (tx) => {
        const [invite] = await tx.select().from(invites)
          .where(and(eq(invites.id, payload.inviteId), eq(invites.agentId, agentId)))
          .for('update');
        if (!invite || invite.email !== payload.email) throw refusedInvite('invalid_invite', !invite);
        if (invite.expiresAt.getTime() <= at) throw refusedInvite('invite_expired');
        const [mine] = await tx.select().from(members)
          .where(and(eq(members.agentId, agentId), eq(members.userId, user.id)))
          .for('update');
        if (mine && mine.status !== 'rejected') {
          throw new ApiError('conflict', 'You are already a member of this agent.', { reason: 'already_member', memberId: mine.id, status: mine.status });
        }
        if (invite.consumedAt) {
          throw mine
            ? new ApiError('conflict', 'Your request to join was declined; ask an owner of the agent for a new invite.', { reason: 'rejected' })
            : new ApiError('conflict', 'This invite has already been used.', { reason: 'invite_used' });
        }
        let memberId: string;
        if (mine) {
          await tx.update(members).set({ status: 'pending', role: 'member', approvedAt: null }).where(eq(members.id, mine.id));
          memberId = mine.id;
        } else {
          const [created] = await tx.insert(members).values({
            agentId, userId: user.id, email: normaliseEmail(user.email), role: 'member', status: 'pending', createdAt: new Date(at),
          }).returning({ id: members.id });
          memberId = created!.id;
        }
        await tx.update(invites).set({ consumedAt: new Date(at), memberId }).where(eq(invites.id, invite.id));
        return { memberId, status: 'pending' as const };
      });
    } catch (err) {
      // Two joins racing for one membership: the loser sees the unique constraint.
      if (isUniqueViolation(err)) throw new ApiError('conflict', 'You are already a member of this agent.', { reason: 'already_member' });
      throw err;
    }
  }

  return {
    /**
     * Owner: records an invite for `email`, signs a token bound to it (7 days), e-mails the link.
     * 409 `already_member` when the address already belongs to a pending or approved member;
     * 429 past `INVITES_PER_AGENT_PER_HOUR`; 503 when the e-mail cannot be sent (the invite is
     * then withdrawn, so no unusable row is left behind).
     */
    async invite(agentId: string, user: SignedInUser, rawEmail: string): Promise<InviteView> {
      const access = await loadAgentAccess(db, agentId, user.id);
      requireOwner(access);
      const { token, url, expiresAt } = await sendInvite(access, user, rawEmail);
      return { token, url, expiresAt };
    },

    /** Owner: the agent's open invites (not used, not expired), newest first; never a token (decision 038). */
    async listInvites(agentId: string, user: SignedInUser): Promise<{ invites: OpenInviteView[] }> {
      const access = await loadAgentAccess(db, agentId, user.id);
      requireOwner(access);
      const rows = await db.select({ id: invites.id, email: invites.email, invitedBy: users.email, createdAt: invites.createdAt, expiresAt: invites.expiresAt })
        .from(invites)
        .leftJoin(users, eq(users.id, invites.invitedBy))
        .where(and(eq(invites.agentId, agentId), isNull(invites.consumedAt), gt(invites.expiresAt, new Date(now()))))
        .orderBy(desc(invites.createdAt), desc(invites.id));
      return {
        invites: rows.map((r) => ({ id: r.id, email: r.email, invitedBy: r.invitedBy, createdAt: r.createdAt.toISOString(), expiresAt: r.expiresAt.toISOString() })),
      };
    },

    /**
     * Owner: mails a fresh link (valid 7 days) for an unused invite, under the invite checks
     * and limits of a new one; the old link stops working. Answers the new invite as listed,
     * plus its link (as POST …/invite does). 404 for a used, withdrawn or foreign invite.
     */
    async resendInvite(agentId: string, user: SignedInUser, inviteId: string): Promise<OpenInviteView & { token: string; url: string }> {
      const access = await loadAgentAccess(db, agentId, user.id);
      requireOwner(access);
      const old = await unusedInvite(agentId, inviteId);
      const sent = await sendInvite(access, user, old.email, old.id);
      return { id: sent.id, email: old.email, invitedBy: user.email, createdAt: sent.createdAt, expiresAt: sent.expiresAt, token: sent.token, url: sent.url };
    },

    /** Owner: withdraws an unused invite; its link no longer joins (400 `invalid_invite`). 404 as for resend. */
    async revokeInvite(agentId: string, user: SignedInUser, inviteId: string): Promise<void> {
      const access = await loadAgentAccess(db, agentId, user.id);
      requireOwner(access);
      await unusedInvite(agentId, inviteId);
      await db.delete(invites).where(and(eq(invites.id, inviteId), eq(invites.agentId, agentId), isNull(invites.consumedAt)));
    },

    /**
     * Any signed-in user: turns a valid invite into a pending membership and consumes the invite,
     * then mails the agent's owners that a request waits for them.
     * Refusals change nothing: 400 `invalid_invite` (tampered, foreign signature, another agent,
     * withdrawn), 400 `invite_expired`, 403 `email_mismatch` (signed in as another address),
     * 409 `already_member`, `invite_used` or `rejected`. A user whose earlier request was
     * rejected may join again only with an invite sent after the rejection (rejecting withdraws
     * every open invite for that address), which reopens the same membership as pending.
     */
    async join(agentId: string, user: SignedInUser, token: string): Promise<{ memberId: string; status: 'pending' }> {
      const joined = await joinWithToken(agentId, user, token);
      // The owners learn of the request at once (decision 038): until one approves it, the member's calls are denied.
      const [agent] = await db.select({ name: agents.name }).from(agents).where(eq(agents.id, agentId));
      const link = `${deps.publicUrl}/agents/${agentId}/members`;
      const joiner = normaliseEmail(user.email);
      await Promise.all((await ownerEmailsOf(agentId)).map((to) => notify({
        to,
        subject: `${joiner} asked to join your agent on Portcullis`,
        text: `${joiner} used your invite and asks to join your agent on Portcullis. The agent's name:\n\n`
          + `    ${quotedForMail(agent?.name ?? '')}\n\n`
          + `Their calls are denied until an owner approves the request. Approve or reject it here:\n${link}\n\n`
          + 'You get this message because you own the agent.',
        link,
      })));
      return joined;
    },

    /**
     * Approved members and owners: the agent's members, oldest first. Rejected requests are
     * shown to owners only (so they can be removed); pending callers get 403. Owners see every
     * record in full; members their own in full and the others' name, role and status only.
     */
    async list(agentId: string, user: SignedInUser, query: MemberListQuery): Promise<{ members: Array<MemberView | MemberSummary>; total: number }> {
      const access = await loadAgentAccess(db, agentId, user.id);
      requireApproved(access);
      const visible = access.isOwner ? ['pending', 'approved', 'rejected'] as const : ['pending', 'approved'] as const;
      const statuses = query.status ? visible.filter((s) => s === query.status) : [...visible];
      if (statuses.length === 0) return { members: [], total: 0 };
      const where: SQL = and(eq(members.agentId, agentId), inArray(members.status, statuses))!;
      const [[counted], rows] = await Promise.all([
        db.select({ n: count() }).from(members).where(where),
        db.select().from(members).where(where).orderBy(asc(members.createdAt), asc(members.id)).limit(query.limit).offset(query.offset),
      ]);
      // Only the records shown in full have their keys and connections looked up at all.
      const full = new Map((await memberViewsOf(db, rows.filter((r) => seesInFull(access, r.id)))).map((v) => [v.id, v]));
      return { members: rows.map((r) => full.get(r.id) ?? memberSummaryOf(r)), total: Number(counted?.n ?? 0) };
    },

    /**
     * Owner: pending → approved, announced with `agent.changed` so `/mcp` stops denying at once,
     * and mailed to the member. Approving an approved member changes nothing (and mails nothing);
     * a rejected one is 409 (invite them again).
     */
    async approve(agentId: string, user: SignedInUser, memberId: string): Promise<MemberView> {
      const access = await loadAgentAccess(db, agentId, user.id);
      requireOwner(access);
      const target = await loadMemberOfAgent(db, agentId, memberId);
      if (target.status === 'approved') return memberViewOf(db, target);
      const [updated] = await db.update(members).set({ status: 'approved', approvedAt: new Date(now()) })
        .where(and(eq(members.id, memberId), eq(members.status, 'pending'))).returning();
      if (!updated) throw new ApiError('conflict', 'Only a pending member can be approved; this request was rejected — send a new invite instead.', { reason: 'not_pending' });
      bus.publishChange({ kind: 'agent.changed', agentId });
      // The member learns they are in (decision 038); the next step is their key and connections.
      const link = `${deps.publicUrl}/agents/${agentId}/onboarding`;
      await notify({
        to: updated.email,
        subject: 'Your request to join an agent on Portcullis was approved',
        text: `${user.email} approved your request to join an agent on Portcullis. The agent's name:\n\n`
          + `    ${quotedForMail(access.agent.name)}\n\n`
          + `Your calls through it are no longer denied for being pending. Connect your accounts and get your member key here:\n${link}`,
        link,
      });
      return memberViewOf(db, updated);
    },

    /**
     * Owner: pending → rejected (409 from any other state). The member's keys are revoked and
     * every open invite to the same address is withdrawn, so neither the used invite nor a
     * spare one gets the person back in; only a new invite can.
     */
    async reject(agentId: string, user: SignedInUser, memberId: string): Promise<MemberView> {
      const access = await loadAgentAccess(db, agentId, user.id);
      requireOwner(access);
      await loadMemberOfAgent(db, agentId, memberId);
      const at = new Date(now());
      const { updated, revoked, ended } = await db.transaction(async (tx) => {
        const [row] = await tx.update(members).set({ status: 'rejected', approvedAt: null })
          .where(and(eq(members.id, memberId), eq(members.status, 'pending'))).returning();
        if (!row) throw new ApiError('conflict', 'Only a pending member can be rejected.', { reason: 'not_pending' });
        const keys = await tx.update(memberKeys).set({ revokedAt: at })
          .where(and(eq(memberKeys.memberId, memberId), isNull(memberKeys.revokedAt))).returning({ id: memberKeys.id });
        await tx.delete(invites).where(and(eq(invites.agentId, agentId), eq(invites.email, row.email), isNull(invites.consumedAt)));
        const revoked = keys.map((k) => k.id);
        return { updated: row, revoked, ended: await endSessionsOfKeys(tx, revoked, 'key_revoked', at) };
      });
      announceRevoked(agentId, revoked);
      announceEndedSessions(bus, ended);
      bus.publishChange({ kind: 'agent.changed', agentId });
      return memberViewOf(db, updated);
    },

    /**
     * Owner: deletes the member with their keys and connections (cascade). 409 `last_owner`
     * when it would leave the agent without an approved owner (delete the agent instead).
     */
    async remove(agentId: string, user: SignedInUser, memberId: string): Promise<void> {
      const access = await loadAgentAccess(db, agentId, user.id);
      requireOwner(access);
      await loadMemberOfAgent(db, agentId, memberId);
      const { keyIds, ended } = await db.transaction(async (tx) => {
        // Lock every owner row first: two owners removing each other at once cannot both succeed.
        const owners = await tx.select({ id: members.id }).from(members)
          .where(and(eq(members.agentId, agentId), eq(members.role, 'owner'), eq(members.status, 'approved')))
          .orderBy(asc(members.id))
          .for('update');
        const [target] = await tx.select().from(members).where(and(eq(members.id, memberId), eq(members.agentId, agentId))).for('update');
        if (!target) throw new ApiError('not_found', 'Member not found.');
        if (target.role === 'owner' && target.status === 'approved' && owners.length <= 1) {
          throw new ApiError('conflict', 'This is the agent\'s last owner; delete the agent instead.', { reason: 'last_owner' });
        }
        const keys = await tx.select({ id: memberKeys.id }).from(memberKeys).where(eq(memberKeys.memberId, memberId));
        const ids = keys.map((k) => k.id);
        // Ended before the cascade deletes them, so their counters are dropped too.
        const endedSessions = await endSessionsOfKeys(tx, ids, 'member_removed', new Date(now()));
        await keepSessionsOfRemovedMember(tx, memberId, target.email);
        await tx.delete(members).where(eq(members.id, memberId));
        return { keyIds: ids, ended: endedSessions };
      });
      announceRevoked(agentId, keyIds);
      announceEndedSessions(bus, ended);
      bus.publishChange({ kind: 'agent.changed', agentId });
    },

    /** Self or owner: the member's connections, metadata only (never tokens). */
    async connections(agentId: string, user: SignedInUser, memberId: string): Promise<{ connections: ConnectionView[] }> {
      const access = await loadAgentAccess(db, agentId, user.id);
      const target = await loadSelfOrOwnerTarget(db, access, memberId, 'see these connections');
      const rows = await db.select({
        service: connections.service, identityInfo: connections.identityInfo, status: connections.status, createdAt: connections.createdAt,
      }).from(connections).where(eq(connections.memberId, target.id)).orderBy(asc(connections.service));
      return { connections: rows.map((r) => ({ ...r, createdAt: r.createdAt.toISOString() })) };
    },
  };
}

export type MemberService = ReturnType<typeof createMemberService>;
