import type { AuditEntryMsg } from '@portcullis/core';
import type { AuditEntrySource } from '../clients/audit-entries.ts';
import { PolicyServiceError } from '../errors.ts';
import type { PolicyRepo } from '../store/policy-repo.ts';
import type { SimulationRepo } from '../store/simulation-repo.ts';
import {
  compileDraft, DEFAULT_DRAFT_KEY, prepareScenario,
  type DraftRecord, type ReplayCall, type ReplayScenario, type ReplayVerdict, type StoredPolicyRecord,
} from './replay.ts';

/** Entries read when the request names no limit. */
export const DEFAULT_LIMIT = 1_000;
/** Most entries one simulation reads. */
export const MAX_LIMIT = 10_000;
/** Window read when the request names no `from`: this long before `to`. */
export const DEFAULT_WINDOW_MS = 7 * 86_400_000;
/** Changed entries reported in `samples`, newest first. */
export const MAX_SAMPLES = 20;
/**
 * Longest the replay judges entries before yielding to the event loop, so Authorize calls and
 * (in single-process mode) every other tenant's requests are not held up behind a simulation.
 * By time, not by count: an entry costs microseconds, or tens of milliseconds when the agent's
 * argument patterns are heavy (decision 020). 2 ms, not 10: a request that arrives during a
 * replay waits one slice at each step of its way (decision 069).
 */
const SLICE_MS = 2;

/** `SimulateRequest` as proto-loader delivers it. */
export interface SimulateInput {
  agentId: string;
  draftJson: string;
  replacePolicyId: string;
  from: string;
  to: string;
  limit: number;
}

export interface SimulationSample {
  entryId: string;
  before: ReplayVerdict['decision'];
  after: ReplayVerdict['decision'];
  /** The reason of the `after` verdict. */
  reason: string;
  /** The entry's time, ISO 8601. */
  timestamp: string;
  memberId: string;
  /** As the entry recorded it (else the member's current e-mail). */
  memberName: string;
  service: string;
  tool: string;
}

/** An entry to replay: its id, the member name it recorded, and the call. */
export interface ReplayInput {
  entryId: string;
  memberName?: string;
  call: ReplayCall;
}

/** `SimulateResponse`. `evaluated = unchanged + allowToDeny + denyToAllow + toApproval + fromApproval`. */
export interface SimulationResult {
  evaluated: number;
  unchanged: number;
  allowToDeny: number;
  denyToAllow: number;
  /** Calls that would become approval-required (held for an owner), from ALLOW or DENY (decision 063). */
  toApproval: number;
  /** Calls that were approval-required and would not be any more. */
  fromApproval: number;
  samples: SimulationSample[];
  /** Entries read but not replayed: not a policy decision, or the member is no longer the agent's. */
  skipped: number;
  /** The window read, ISO 8601. */
  from: string;
  to: string;
  /** The draft's mode: `shadow` = the counts are what it would change once promoted. */
  draftMode: 'enforce' | 'shadow';
  /**
   * Calls whose enforced verdict saving the draft as it is changes: `allowToDeny + denyToAllow`
   * for an enforced draft; for a shadow draft 0, unless it replaces an enforced policy (which
   * then stops deciding) — replayed a second time with the draft in shadow (decision 061).
   */
  enforcedChanges: number;
}

export interface SimulationDeps {
  policies: Pick<PolicyRepo, 'loadAgentPolicies'>;
  store: SimulationRepo;
  /** Undefined when the service has no `AUDIT_URL`: every simulation is UNAVAILABLE. */
  audit: Pick<AuditEntrySource, 'recentEntries'> | undefined;
  now?: () => number;
}

/** A simulation request, checked. */
export interface SimulationPlan {
  agentId: string;
  draft: unknown;
  replacePolicyId: string | undefined;
  from: Date;
  to: Date;
  limit: number;
}

/**
 * Simulate: replays the agent's newest audit entries in the window through its current
 * enabled policies and through them with the draft, and counts what changes. Reads Postgres
 * and the audit service; writes nothing, touches no cache and no session counter.
 *
 * Throws `PolicyServiceError`: `invalid_request` for a malformed request, a draft with
 * errors, an unknown agent or a `replace_policy_id` that is not the agent's; `unavailable`
 * when the audit service is not configured or cannot be read, or Postgres fails.
 */
export async function simulate(deps: SimulationDeps, input: SimulateInput): Promise<SimulationResult> {
  const plan = readSimulateRequest(input, deps.now ?? Date.now);
  const draft = compileDraft(plan.draft);
  if (!draft.ok) throw invalid(`the draft has errors: ${draft.errors.join('; ')}`);
  if (!deps.audit) throw new PolicyServiceError('unavailable', 'Simulate needs the audit service, and the decision point has no AUDIT_URL configured');

  const snapshot = await deps.policies.loadAgentPolicies(plan.agentId);
  if (!snapshot) throw invalid(`agent_id ${JSON.stringify(plan.agentId)} is not an agent`);
  let replaced: { id: string; policyKey: string } | undefined;
  if (plan.replacePolicyId !== undefined) {
    replaced = await deps.store.findPolicy(plan.agentId, plan.replacePolicyId);
    if (!replaced) throw invalid(`replace_policy_id ${JSON.stringify(plan.replacePolicyId)} is not a policy of this agent`);
  }
  const current = snapshot.policies.filter((p) => p.enabled);
  const withDraft = recordsWithDraft(current, draft.record, replaced);

  const entries = await deps.audit.recentEntries({ agentId: plan.agentId, from: plan.from, to: plan.to, limit: plan.limit });
  const decisions = entries.filter(isPolicyDecision);
  const members = await deps.store.loadMembers(plan.agentId, decisions.map((e) => e.memberId));
  const calls: ReplayInput[] = [];
  for (const entry of decisions) {
    const call = replayCallOf(entry, members);
    if (call) calls.push({ entryId: entry.id, memberName: entry.memberName, call });
  }

  const before = prepareScenario(snapshot, current, 'before');
  let after: ReplayScenario | undefined;
  let saved: ReplayScenario | undefined;
  try {
    after = prepareScenario(snapshot, withDraft, 'after');
    const counts = await replay(calls, before, after);
    let enforcedChanges = changesOf(counts);
    if (draft.mode === 'shadow') {
      // What saving it in shadow changes now: nothing, unless the policy it replaces was enforced.
      const replacedEnforced = replaced !== undefined && current.some((p) => p.id === replaced.id && p.mode !== 'shadow');
      if (replacedEnforced) {
        saved = prepareScenario(snapshot, recordsWithDraft(current, { ...draft.record, mode: 'shadow' }, replaced), 'saved');
        const now = await replay(calls, before, saved);
        enforcedChanges = changesOf(now);
      } else {
        enforcedChanges = 0;
      }
    }
    return {
      ...counts, skipped: entries.length - counts.evaluated, from: plan.from.toISOString(), to: plan.to.toISOString(), draftMode: draft.mode, enforcedChanges,
    };
  } finally {
    before.release();
    after?.release();
    saved?.release();
  }
}

/** Checks the wire request; throws `PolicyServiceError('invalid_request')` naming the field. */
export function readSimulateRequest(input: SimulateInput, now: () => number): SimulationPlan {
  if (!input.agentId) throw invalid('agent_id is required');
  if (!input.draftJson) throw invalid('draft_json is required');
  let draft: unknown;
  try {
    draft = JSON.parse(input.draftJson);
  } catch {
    throw invalid('draft_json is not valid JSON');
  }
  const limit = Number(input.limit ?? 0);
  if (!Number.isInteger(limit) || limit < 0 || limit > MAX_LIMIT) throw invalid(`limit must be between 1 and ${MAX_LIMIT} (0 = ${DEFAULT_LIMIT}), got ${input.limit}`);
  const to = input.to ? parseInstant(input.to, 'to', 'to') : new Date(Math.trunc(now()));
  const from = input.from ? parseInstant(input.from, 'from', 'from') : new Date(to.getTime() - DEFAULT_WINDOW_MS);
  if (from > to) throw invalid(`from (${input.from || from.toISOString()}) is after to (${input.to || to.toISOString()})`);
  return { agentId: input.agentId, draft, replacePolicyId: input.replacePolicyId || undefined, from, to, limit: limit === 0 ? DEFAULT_LIMIT : limit };
}

const ISO_8601 = /^\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2}))?$/;

/**
 * An ISO 8601 date or date-time with its offset (`Z` or `±hh:mm`). A bare date is the whole
 * day in UTC: its first millisecond as `from`, its last as `to`, so both bounds stay inclusive.
 */
function parseInstant(value: string, field: string, bound: 'from' | 'to'): Date {
  const ms = ISO_8601.test(value) ? Date.parse(value) : Number.NaN;
  if (Number.isNaN(ms)) throw invalid(`${field} must be an ISO 8601 date or date-time with offset (e.g. 2026-11-01T00:00:00Z), got ${JSON.stringify(value)}`);
  return new Date(value.length === 10 && bound === 'to' ? ms + 86_400_000 - 1 : ms);
}

/**
 * The gateway audits some calls it refuses before asking the decision point (the agent is
 * disabled, the connector is not enabled or not connected, no verdict could be had). They
 * carry no policy decision, so replaying them would report changes no policy could make.
 * Audit entries do not say which stage decided, so these are recognised by the gateway's
 * reasons (services/gateway/src/mcp/tool-call-service.ts and mcp-route.ts).
 */
const REFUSED_BEFORE_POLICY: readonly RegExp[] = [
  /^Agent is disabled$/,
  / is not enabled on this agent$/,
  / is not connected for this member; /,
  /^Policy service unavailable:/,
  // A tool call with an unknown name names the connector of its prefix (decision 071).
  /^Unknown tool "/,
];

const NOT_CALLS: ReadonlySet<string> = new Set(['approved', 'denied', 'expired', 'returned']);

/** Whether `entry` records a verdict of the decision point (and so can be replayed). */
export function isPolicyDecision(entry: Pick<AuditEntryMsg, 'service' | 'tool' | 'reason' | 'approvalEvent'>): boolean {
  // An owner's approval decision and an approved call's return are events, not calls (decision 063).
  if (entry.approvalEvent !== undefined && NOT_CALLS.has(entry.approvalEvent)) return false;
  return entry.service !== '' && entry.tool !== '' && !REFUSED_BEFORE_POLICY.some((re) => re.test(entry.reason));
}

/** The entry as a call to judge; undefined when it cannot be replayed (member gone, bad timestamp). */
function replayCallOf(entry: AuditEntryMsg, members: ReadonlyMap<string, ReplayCall['member']>): ReplayCall | undefined {
  const member = members.get(entry.memberId);
  const nowMs = Date.parse(entry.timestamp);
  if (!member || Number.isNaN(nowMs)) return undefined;
  return { member, service: entry.service, tool: entry.tool, args: parseArgs(entry.toolArgsJson), nowMs, sessionId: entry.sessionId };
}

/** The entry's (redacted) arguments; anything that is not a JSON object replays as no arguments. */
function parseArgs(json: string): Record<string, unknown> {
  try {
    const value: unknown = json ? JSON.parse(json) : {};
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? value as Record<string, unknown> : {};
  } catch {
    return {};
  }
}

/**
 * The agent's enabled records with the draft added, or in place of `replaced`. The draft
 * keeps its own key; without one it takes the replaced policy's key, else `draft` (made
 * unique). A key another enabled policy already has is refused: saving would refuse it too.
 */
export function recordsWithDraft(current: readonly StoredPolicyRecord[], draft: DraftRecord, replaced: { id: string; policyKey: string } | undefined): StoredPolicyRecord[] {
  const others = replaced ? current.filter((p) => p.id !== replaced.id) : [...current];
  const taken = new Set(others.map((p) => p.policyKey));
  let policyKey = draft.policyKey ?? replaced?.policyKey;
  if (policyKey === undefined) {
    policyKey = DEFAULT_DRAFT_KEY;
    for (let n = 2; taken.has(policyKey); n++) policyKey = `${DEFAULT_DRAFT_KEY}-${n}`;
  } else if (taken.has(policyKey)) {
    throw invalid(`the draft's policyKey ${JSON.stringify(policyKey)} is already used by another policy of this agent${replaced ? '' : '; pass replace_policy_id to simulate replacing it'}`);
  }
  return [...others, { ...draft, policyKey, id: replaced?.id ?? '', currentVersionId: null }];
}

/**
 * Judges every call twice, oldest first (so each scenario sees a session's calls in the
 * order they happened), and counts the changes. Samples are the newest changed entries.
 */
export async function replay(calls: readonly ReplayInput[], before: ReplayScenario, after: ReplayScenario): Promise<Omit<SimulationResult, 'skipped' | 'from' | 'to' | 'draftMode' | 'enforcedChanges'>> {
  const ordered = [...calls].sort((a, b) => a.call.nowMs - b.call.nowMs || (a.entryId < b.entryId ? -1 : a.entryId > b.entryId ? 1 : 0));
  let unchanged = 0, allowToDeny = 0, denyToAllow = 0, toApproval = 0, fromApproval = 0;
  const changed: SimulationSample[] = [];
  let sliceStarted = performance.now();
  for (const { entryId, memberName, call } of ordered) {
    if (performance.now() - sliceStarted >= SLICE_MS) {
      await new Promise((resolve) => setImmediate(resolve));
      sliceStarted = performance.now();
    }
    const was = before.judge(call);
    const now = after.judge(call);
    if (was.decision === now.decision) {
      unchanged++;
      continue;
    }
    if (now.decision === 'APPROVAL_REQUIRED') toApproval++;
    else if (was.decision === 'APPROVAL_REQUIRED') fromApproval++;
    else if (now.decision === 'DENY') allowToDeny++;
    else denyToAllow++;
    changed.push({
      entryId, before: was.decision, after: now.decision, reason: now.reason,
      timestamp: new Date(call.nowMs).toISOString(), memberId: call.member.id, memberName: memberName || call.member.email, service: call.service, tool: call.tool,
    });
  }
  return { evaluated: ordered.length, unchanged, allowToDeny, denyToAllow, toApproval, fromApproval, samples: changed.slice(-MAX_SAMPLES).reverse() };
}

/** Every verdict a replay changed, whichever way. */
function changesOf(counts: Pick<SimulationResult, 'allowToDeny' | 'denyToAllow' | 'toApproval' | 'fromApproval'>): number {
  return counts.allowToDeny + counts.denyToAllow + counts.toApproval + counts.fromApproval;
}

function invalid(message: string): PolicyServiceError {
  return new PolicyServiceError('invalid_request', message);
}
