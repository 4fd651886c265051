import { randomUUID } from 'node:crypto';
import { uuidv7 } from 'uuidv7';
import { actionUid, ApiError, openWithSecret, principalUid, resourceOf, sealWithSecret, type ApprovalEvent, type AuditEntry, type AuthorizeResponse, type Bus, type Database } from '@portcullis/core';
import type { AuditPublisher } from '../audit/audit-publisher.ts';
import type { MemberContext } from '../identity/member-context.ts';
import type { Mailer } from '../mail/mailer.ts';
import { canonicalArgs, digestOfCanonical } from './args-digest.ts';
import { exactArgs, maskedArgs } from './args-view.ts';
import { createCallApprovalRepo, type ApprovalBinding, type CallApprovalRevealRow, type CallApprovalRow, type QueueFull } from './call-approval-repo.ts';
import type { CallApproval, CallApprovalForOwner, CallApprovalRevealAnswer, CallApprovalStatusFilter } from './call-approval-types.ts';

/** Settings of call approvals (decision 063); TTLs from `APPROVAL_*` configuration. */
export interface CallApprovalSettings {
  /** How long a pending request stays open. */
  pendingTtlMs: number;
  /** How long an approval is usable from the moment it is given. */
  grantTtlMs: number;
  /** How often this replica marks open requests past their expiry `expired`. */
  sweepIntervalMs: number;
  /** At most one mail per agent this often. */
  mailIntervalMs: number;
  /** Most open (pending) requests one member of an agent may have; a call over it is denied (decision 067). */
  maxPendingPerMember: number;
  /** Most open (pending) requests one agent may have. */
  maxPendingPerAgent: number;
}

/** Label of the held arguments' sealing under the server secret: sealed for this use, opened for no other. */
const SEALED_ARGS_LABEL = 'portcullis/call-approval-args/v1';

/** What the gateway does with a call the decision point answered APPROVAL_REQUIRED. */
export type ApprovalOutcome =
  /** Held: a request is open (new when `fresh`). Nothing is forwarded. */
  | { kind: 'pending'; approval: CallApproval; fresh: boolean }
  /** Approved and spent by this call: forward it once. */
  | { kind: 'approved'; approval: CallApproval }
  /** An owner denied it; denied until the request's expiry. */
  | { kind: 'denied'; approval: CallApproval }
  /** The request expired before anyone decided or before the approval was used; the next call proposes anew. */
  | { kind: 'expired'; approval: CallApproval }
  /** Not held: the member's or the agent's queue of open requests is full (decision 067). Nothing is recorded or forwarded. */
  | { kind: 'queue_full'; reason: string };

/** Who decides, and from where (the owner's audit entry names them). */
export interface Approver { userId: string; email: string; ip: string }

type Listener = (approval: CallApprovalForOwner) => void;

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/**
 * Call approvals (decision 063): the single-use grants behind `require_approval` policies.
 * State lives in Postgres (any replica serves any step); every change is announced on the bus
 * (`approval.changed`) so every replica's live streams send it.
 */
export function createCallApprovalService(deps: {
  db: Database;
  bus: Pick<Bus, 'publishChange' | 'onChange'>;
  audit: Pick<AuditPublisher, 'publish'>;
  mailer: Mailer;
  publicUrl: string;
  /** The server secret: held calls' exact arguments are sealed under a key derived from it. */
  secret: string;
  settings: CallApprovalSettings;
  now?: () => number;
  log?: (message: string, err?: unknown) => void;
}) {
  const repo = createCallApprovalRepo(deps.db);
  const now = () => new Date(deps.now?.() ?? Date.now());
  const publicUrl = deps.publicUrl.replace(/\/$/, '');
  const listeners = new Map<string, Set<Listener>>();
  const mailTimers = new Map<string, NodeJS.Timeout>();

  /** The page where owners decide, with the request highlighted. */
  const pageUrl = (agentId: string, id: string) => `${publicUrl}/agents/${agentId}/approvals?id=${id}`;

  function view(row: CallApprovalRow, at = now()): CallApproval {
    const open = row.status === 'pending' || row.status === 'approved';
    return {
      id: row.id, agentId: row.agentId, memberId: row.memberId, memberEmail: row.memberEmail, service: row.service, tool: row.tool,
      toolArgs: row.toolArgs, argsDigest: row.argsDigest, policyId: row.policyId, policyName: row.policyName, policyVersionId: row.policyVersionId,
      status: open && row.expiresAt <= at ? 'expired' : row.status,
      reason: row.reason, approverId: row.approverId, approverEmail: row.approverEmail,
      createdAt: row.createdAt.toISOString(), expiresAt: row.expiresAt.toISOString(), decidedAt: iso(row.decidedAt), executedAt: iso(row.executedAt),
      auditEntryIds: row.auditEntryIds,
    };
  }

  const revealView = (r: CallApprovalRevealRow) => ({ userId: r.userId, userEmail: r.userEmail, revealedAt: r.revealedAt.toISOString() });

  /** The exact arguments of a request, while they are kept: opened, and checked against the digest the request binds. */
  function openArgs(row: CallApprovalRow): Record<string, unknown> {
    const canonical = openWithSecret(deps.secret, SEALED_ARGS_LABEL, row.sealedArgs!);
    if (digestOfCanonical(canonical) !== row.argsDigest) throw new Error('sealed arguments do not match the request\'s digest');
    return JSON.parse(canonical) as Record<string, unknown>;
  }

  /**
   * Requests as their owners see them (decision 067): the exact arguments, secret-looking spans
   * masked, while the request is open or approved (null after: they are destroyed), and its reveals.
   */
  async function ownerViews(rows: readonly CallApprovalRow[], at = now()): Promise<CallApprovalForOwner[]> {
    const reveals = await repo.revealsOf(rows.map((r) => r.id));
    return rows.map((row) => {
      const base = view(row, at);
      const live = (base.status === 'pending' || base.status === 'approved') && row.sealedArgs;
      let shown: ReturnType<typeof maskedArgs> | undefined;
      try {
        shown = live ? maskedArgs(openArgs(row)) : undefined;
      } catch (err) {
        // Sealed under another server secret (rotated): the page falls back to the redacted form.
        deps.log?.(`call approvals: the arguments of ${row.id} cannot be opened`, err);
      }
      return { ...base, args: shown?.args ?? null, secretSpans: shown?.secretSpans ?? [], reveals: (reveals.get(row.id) ?? []).map(revealView) };
    });
  }
  const ownerView = async (row: CallApprovalRow, at = now()) => (await ownerViews([row], at))[0]!;

  /** The reason a call over a queue cap is denied with (the agent reads it; the audit records it). */
  const queueFullReason = (full: QueueFull) =>
    `Approval queue full: ${full.scope === 'member' ? 'this member has' : 'this agent has'} ${full.open} open approval requests (at most ${full.max}); `
    + 'this call was not held for approval and not forwarded. Wait until an owner decides the open ones, or they expire, then call again.';

  const announce = (row: CallApprovalRow) => deps.bus.publishChange({ kind: 'approval.changed', approvalId: row.id, agentId: row.agentId });

  /** Publishes an audit entry of the request's events and adds its id to the request. */
  async function recordEvent(approvalId: string, entry: AuditEntry): Promise<void> {
    deps.audit.publish(entry);
    await repo.addAuditEntry(approvalId, entry.id);
  }

  /** The audit entry of an event no tool call carries (an owner's decision, an expiry), built from the request. */
  function eventEntry(row: CallApprovalRow, agentName: string, event: ApprovalEvent, decision: 'ALLOW' | 'DENY', reason: string, approver?: Approver): AuditEntry {
    return {
      id: uuidv7(), timestamp: now().toISOString(),
      agentId: row.agentId, agentName, memberId: row.memberId, memberName: row.memberEmail, memberKeyId: row.memberKeyId,
      service: row.service, tool: row.tool, action: actionUid(row.service, row.tool), resource: resourceOf(row.service, row.toolArgs).uid,
      callerIp: approver?.ip ?? '', toolArgs: row.toolArgs, decision, reason,
      matchedPolicyIds: [row.policyKey], matchedPolicyNames: [row.policyName], policyDbIds: [row.policyId], policyVersionIds: [row.policyVersionId],
      durationMs: 0, principal: principalUid(row.memberId),
      approvalId: row.id, approvalEvent: event,
      ...(approver ? { approverId: approver.userId, approverName: approver.email } : {}),
    };
  }

  async function expiredEvents(rows: readonly CallApprovalRow[]): Promise<void> {
    for (const row of rows) {
      const agent = await repo.agentAndOwners(row.agentId);
      const what = row.status === 'approved' ? 'the approval was not used in time' : 'no owner decided in time';
      await recordEvent(row.id, eventEntry(row, agent?.agentName ?? '', 'expired', 'DENY', `Approval request ${row.id} expired: ${what}`));
      announce(row);
    }
  }

  // ── mail: at most one per agent per interval, the rest summarised by the next ──

  async function mailOwners(agentId: string): Promise<void> {
    const at = now();
    if (!(await repo.claimMailSlot(agentId, at, new Date(at.getTime() - deps.settings.mailIntervalMs)))) {
      // Inside the window: one trailing mail from this replica covers what was proposed meanwhile.
      if (!mailTimers.has(agentId)) {
        const timer = setTimeout(() => {
          mailTimers.delete(agentId);
          mailOwners(agentId).catch((err) => deps.log?.('call approvals: mail failed', err));
        }, deps.settings.mailIntervalMs);
        timer.unref();
        mailTimers.set(agentId, timer);
      }
      return;
    }
    const [agent, pending] = await Promise.all([repo.agentAndOwners(agentId), repo.list(agentId, { status: 'pending', limit: 10, offset: 0 }, at)]);
    if (!agent || pending.total === 0) return;
    const lines = pending.rows.map((r) => `- ${r.service}__${r.tool} by ${r.memberEmail} (policy "${r.policyName}"), open until ${r.expiresAt.toISOString()}: ${pageUrl(agentId, r.id)}`);
    const subject = pending.total === 1
      ? `Approval needed: ${pending.rows[0]!.service}__${pending.rows[0]!.tool} on ${agent.agentName}`
      : `${pending.total} calls on ${agent.agentName} await your approval`;
    const text = [
      `Calls of agent "${agent.agentName}" are waiting for an owner's approval (${pending.total} pending):`,
      '',
      ...lines,
      ...(pending.total > lines.length ? [`… and ${pending.total - lines.length} more.`] : []),
      '',
      `Review them: ${publicUrl}/agents/${agentId}/approvals`,
    ].join('\n');
    for (const to of agent.ownerEmails) {
      await deps.mailer.send({ to, subject, text, link: pending.total === 1 ? pageUrl(agentId, pending.rows[0]!.id) : `${publicUrl}/agents/${agentId}/approvals` });
    }
  }

  // ── the call path ──

  /**
   * Looks at the newest request of the call's binding and says what to do (decision 063's
   * table). Consuming an approval and proposing a request are single statements that only one
   * replica can win; a loser looks again.
   */
  async function onApprovalRequired(context: MemberContext, call: { service: string; tool: string; args: Record<string, unknown>; redactedArgs: Record<string, unknown>; verdict: AuthorizeResponse }): Promise<ApprovalOutcome> {
    const keys = call.verdict.approvalPolicyKeys ?? [];
    const ids = call.verdict.approvalPolicyIds ?? [];
    const versions = call.verdict.approvalPolicyVersionIds ?? [];
    // The exact bytes the approval binds by digest are the ones sealed for the approver to see (decision 067).
    const canonical = canonicalArgs(call.args);
    const binding: ApprovalBinding = {
      agentId: context.agentId, memberId: context.memberId, service: call.service, tool: call.tool,
      argsDigest: digestOfCanonical(canonical), bindingVersions: versions.join(','),
    };
    for (let attempt = 0; attempt < 4; attempt++) {
      const at = now();
      const newest = await repo.newest(binding);
      if (newest) {
        const open = newest.status === 'pending' || newest.status === 'approved';
        const expired = newest.status === 'expired' || (open && newest.expiresAt <= at);
        if (expired && !newest.expiryReportedAt) {
          if (open) await expiredEvents(await repo.expireOpen(at, newest.id));
          if (await repo.reportExpiry(newest.id, at)) return { kind: 'expired', approval: view((await repo.byId(newest.id)) ?? newest, at) };
          continue;
        }
        if (!expired && newest.status === 'pending') return { kind: 'pending', approval: view(newest, at), fresh: false };
        if (!expired && newest.status === 'approved') {
          const spent = await repo.consume(newest.id, at);
          if (spent) {
            announce(spent);
            return { kind: 'approved', approval: view(spent, at) };
          }
          continue; // another replica spent it, or it just expired: look again
        }
        if (newest.status === 'denied' && newest.expiresAt > at) return { kind: 'denied', approval: view(newest, at) };
      }
      const policyName = call.verdict.matchedPolicyNames[call.verdict.matchedPolicyKeys.indexOf(keys[0] ?? '')] ?? keys[0] ?? '';
      const { inserted, full } = await repo.insertPending({
        id: randomUUID(), agentId: context.agentId, memberId: context.memberId, memberEmail: context.memberEmail, memberKeyId: context.keyId,
        service: call.service, tool: call.tool, toolArgs: call.redactedArgs, sealedArgs: sealWithSecret(deps.secret, SEALED_ARGS_LABEL, canonical),
        argsDigest: binding.argsDigest,
        policyId: ids[0] ?? '', policyKey: keys[0] ?? '', policyName, policyVersionId: versions[0] ?? '', bindingVersions: binding.bindingVersions,
        createdAt: at, expiresAt: new Date(at.getTime() + deps.settings.pendingTtlMs),
      }, { perMember: deps.settings.maxPendingPerMember, perAgent: deps.settings.maxPendingPerAgent }, at);
      if (full) return { kind: 'queue_full', reason: queueFullReason(full) };
      if (!inserted) continue; // another replica proposed the same call a moment ago
      announce(inserted);
      mailOwners(context.agentId).catch((err) => deps.log?.('call approvals: mail failed', err));
      return { kind: 'pending', approval: view(inserted, at), fresh: true };
    }
    throw new Error('call approval: the request kept changing under this call');
  }

  // ── owners ──

  async function decide(agentId: string, approvalId: string, approver: Approver, decision: { status: 'approved' | 'denied'; reason: string | null }): Promise<CallApprovalForOwner> {
    const at = now();
    const row = await repo.decide(agentId, approvalId, {
      ...decision, approverId: approver.userId, approverEmail: approver.email,
      ...(decision.status === 'approved' ? { grantExpiresAt: new Date(at.getTime() + deps.settings.grantTtlMs) } : {}),
    }, at);
    if (!row) {
      const current = await repo.get(agentId, approvalId);
      if (!current) throw new ApiError('not_found', 'Call approval not found.');
      const status = view(current, at).status;
      throw new ApiError('conflict', `The call approval is not pending: it is ${status}.`, { status });
    }
    const agent = await repo.agentAndOwners(agentId);
    const reason = decision.status === 'approved'
      ? `Approved by ${approver.email}${decision.reason ? `: ${decision.reason}` : ''}; usable once until ${row.expiresAt.toISOString()}`
      : `Denied by ${approver.email}: ${decision.reason ?? ''}`;
    const entry = eventEntry(row, agent?.agentName ?? '', decision.status, decision.status === 'approved' ? 'ALLOW' : 'DENY', reason, approver);
    await recordEvent(row.id, entry);
    announce(row);
    return ownerView({ ...row, auditEntryIds: [...row.auditEntryIds, entry.id].slice(0, 100) }, at);
  }

  let sweeper: NodeJS.Timeout | undefined;
  let sweeping = false;
  /** Marks open requests past their expiry `expired`, audits and announces each (one replica per row). */
  async function sweep(): Promise<number> {
    if (sweeping) return 0;
    sweeping = true;
    try {
      const rows = await repo.expireOpen(now());
      await expiredEvents(rows);
      return rows.length;
    } finally {
      sweeping = false;
    }
  }

  let unsubscribe: (() => void) | undefined;
  function ensureSubscribed() {
    unsubscribe ??= deps.bus.onChange((event) => {
      if (event.kind !== 'approval.changed') return;
      const forAgent = listeners.get(event.agentId);
      if (!forAgent || forAgent.size === 0) return;
      repo.byId(event.approvalId).then(async (row) => {
        if (!row || row.agentId !== event.agentId) return;
        const approval = await ownerView(row);
        for (const listener of listeners.get(event.agentId) ?? []) listener(approval);
      }).catch((err) => deps.log?.('call approvals: reading a changed request failed', err));
    });
  }

  return {
    pageUrl,
    view,
    onApprovalRequired,
    recordEvent,

    /** Adds an entry the caller published itself (the held call's) to the request's list; never throws. */
    recordEventId(approvalId: string, entryId: string): void {
      repo.addAuditEntry(approvalId, entryId).catch((err) => deps.log?.('call approvals: recording an audit entry id failed', err));
    },

    async list(agentId: string, query: { status?: CallApprovalStatusFilter; limit: number; offset: number }) {
      const at = now();
      const { rows, total } = await repo.list(agentId, query, at);
      return { approvals: await ownerViews(rows, at), total };
    },

    async get(agentId: string, approvalId: string): Promise<CallApprovalForOwner> {
      const row = await repo.get(agentId, approvalId);
      if (!row) throw new ApiError('not_found', 'Call approval not found.');
      return ownerView(row);
    },

    /**
     * The exact arguments of an open or approved request, unmasked, for one of its owners; the
     * reveal is recorded (who, when) and announced. 409 `conflict` once they are destroyed
     * (executed, denied, expired), with the status in `details`.
     */
    async reveal(agentId: string, approvalId: string, viewer: Pick<Approver, 'userId' | 'email'>): Promise<CallApprovalRevealAnswer> {
      const at = now();
      const unopenable = (row: CallApprovalRow) => new ApiError('conflict', 'The exact arguments of this call approval cannot be opened (the server secret changed since the call was held).', { status: view(row, at).status });
      const found = await repo.reveal(agentId, approvalId, viewer, at, (row) => {
        try {
          return exactArgs(openArgs(row));
        } catch {
          throw unopenable(row); // nothing was shown: no reveal is recorded
        }
      });
      if (!found) throw new ApiError('not_found', 'Call approval not found.');
      if (!found.opened || !found.reveal) {
        const status = view(found.row, at).status;
        throw new ApiError('conflict', `The exact arguments of this call approval no longer exist: it is ${status}, and they are destroyed once a request is executed, denied or expired. Only the redacted form (toolArgs) remains.`, { status });
      }
      announce(found.row);
      return { approvalId, args: found.opened.args, secretSpans: found.opened.secretSpans, reveal: revealView(found.reveal) };
    },

    approve: (agentId: string, approvalId: string, approver: Approver, comment: string | undefined) =>
      decide(agentId, approvalId, approver, { status: 'approved', reason: comment?.trim() ? comment.trim() : null }),

    deny: (agentId: string, approvalId: string, approver: Approver, reason: string) =>
      decide(agentId, approvalId, approver, { status: 'denied', reason: reason.trim() }),

    async pendingForOwner(userId: string, limit: number) {
      const at = now();
      const { rows, total } = await repo.pendingForOwner(userId, limit, at);
      return { approvals: await ownerViews(rows, at), total };
    },

    /** Live changes of one agent's requests (this replica's listeners; the bus brings every replica's changes). */
    subscribe(agentId: string, listener: Listener): () => void {
      ensureSubscribed();
      let set = listeners.get(agentId);
      if (!set) listeners.set(agentId, (set = new Set()));
      set.add(listener);
      return () => {
        set.delete(listener);
        if (set.size === 0) listeners.delete(agentId);
      };
    },

    sweep,

    /** Starts this replica's expiry sweep. */
    start() {
      sweeper ??= setInterval(() => { sweep().catch((err) => deps.log?.('call approvals: expiry sweep failed', err)); }, deps.settings.sweepIntervalMs);
      sweeper.unref();
    },

    close() {
      clearInterval(sweeper);
      sweeper = undefined;
      for (const timer of mailTimers.values()) clearTimeout(timer);
      mailTimers.clear();
      unsubscribe?.();
      unsubscribe = undefined;
      listeners.clear();
    },
  };
}

export type CallApprovalService = ReturnType<typeof createCallApprovalService>;
