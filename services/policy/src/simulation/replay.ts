/**
 * The one place Simulate touches the engine: draft compilation, building a policy set from
 * records, judging one past call. Everything else in `simulation/` is engine-agnostic, so a
 * change of the engine's API is adapted here.
 */
import type { MemberMsg } from '@portcullis/core';
import type { StoredPolicyRecord } from '../engine/compile.ts';
import { evaluate } from '../engine/evaluate.ts';
import { preparePolicySet, type AgentPolicySnapshot } from '../engine/prepared-set.ts';
import { compilePreview, DRAFT_POLICY_KEY, policyDraftSchema } from '../engine/preview.ts';
import { createInMemorySessionCounters } from '../engine/session-counters.ts';

export type { AgentPolicySnapshot, StoredPolicyRecord };

/** A draft's record: a stored record without database ids, its key undefined when the draft has none. */
export type DraftRecord = Omit<StoredPolicyRecord, 'id' | 'currentVersionId' | 'policyKey'> & { policyKey: string | undefined };

/** A draft checked in authoring mode: its record (always enforced) and the mode it asked for, or what is wrong with it. */
export type DraftCompilation = { ok: true; record: DraftRecord; mode: 'enforce' | 'shadow' } | { ok: false; errors: string[] };

/** The key a draft without one gets, unless taken; see `pickDraftKey`. */
export const DEFAULT_DRAFT_KEY = DRAFT_POLICY_KEY;

/**
 * Compiles `draft` (any JSON value) exactly as Preview does; errors name the field. The
 * record keeps `policyKey` undefined when the draft has none (the caller picks one).
 */
export function compileDraft(draft: unknown): DraftCompilation {
  const preview = compilePreview(draft);
  if (preview.errors.length > 0) return { ok: false, errors: preview.errors };
  const parsed = policyDraftSchema.parse(draft);
  // Simulated as enabled whatever its flag: the question is what the draft would change once
  // on (a disabled draft would change nothing), as for replacing a disabled policy (decision 013).
  // Likewise enforced whatever its mode: a shadow draft is replayed for what it would do once
  // promoted; the answer says its mode, so a reader knows no verdict changes meanwhile (decision 061).
  const { policyKey, enabled: _enabled, mode, ...rest } = parsed;
  return { ok: true, record: { ...rest, policyKey, enabled: true, mode: 'enforce' }, mode: mode ?? 'enforce' };
}

/** One past call, as Simulate replays it. */
export interface ReplayCall {
  member: MemberMsg;
  service: string;
  tool: string;
  args: Record<string, unknown>;
  /** The entry's timestamp: the instant the call is judged at. */
  nowMs: number;
  /** Empty when the call had no MCP session. */
  sessionId: string;
}

/** A verdict reduced to what Simulate reports. */
export interface ReplayVerdict {
  /** APPROVAL_REQUIRED: held for an owner's approval, not forwarded (decision 063). */
  decision: 'ALLOW' | 'DENY' | 'APPROVAL_REQUIRED';
  reason: string;
}

/** One policy set under simulation; `release()` frees its Cedar memory. */
export interface ReplayScenario {
  judge(call: ReplayCall): ReplayVerdict;
  release(): void;
}

let built = 0;

/**
 * A scenario of `snapshot` (the agent as stored: status, version…) with `records` as its
 * policies. Each build gets Cedar ids of its own (`simulate:<agent>:<n>:<label>`), so a
 * simulation never shares, overwrites or keeps the serving cache's sets.
 *
 * Session limits: each scenario counts, in session counters of its own (never the serving
 * ones), the calls IT let through; replay feeds calls in time order, so a session-limited
 * policy sees the session's history as that scenario would have made it
 * (docs/decisions/013-simulate.md).
 */
export function prepareScenario(snapshot: AgentPolicySnapshot, records: readonly StoredPolicyRecord[], label: string): ReplayScenario {
  const set = preparePolicySet({ ...snapshot, policies: records }, `simulate:${snapshot.agentId}:${++built}:${label}`);
  const sessions = createInMemorySessionCounters();
  return {
    judge(call) {
      const verdict = evaluate(set, {
        agentId: snapshot.agentId, member: call.member, service: call.service, tool: call.tool, args: call.args, nowMs: call.nowMs,
        ...(call.sessionId ? { sessionId: call.sessionId } : {}),
      }, { sessions });
      return { decision: verdict.decision === 'ALLOW' || verdict.decision === 'APPROVAL_REQUIRED' ? verdict.decision : 'DENY', reason: verdict.reason };
    },
    release: () => set.release(),
  };
}
