import * as cedar from '@cedar-policy/cedar-wasm/nodejs';
import { actionUid, NO_FORBID_MATCHED, principalUid, PRINCIPAL_TYPE, resourceOf, type AuthorizeResponse, type MemberMsg } from '@portcullis/core';
import { catalogAction, type CatalogAction } from './action-index.ts';
import { BASE_POLICY_KEY, compareStrings, MEMBER_NOT_APPROVED_POLICY_KEY } from './compile.ts';
import { rememberedOutcome, rememberOutcome, type DecisionOutcome, type PreparedPolicySet } from './prepared-set.ts';

/** One tool call to judge, already read from the wire. */
export interface AuthorizeInput {
  agentId: string;
  member: MemberMsg;
  service: string;
  tool: string;
  args: Record<string, unknown>;
  /** Evaluation time, whole milliseconds since the epoch. */
  nowMs: number;
}

/**
 * The verdict, shaped like the gRPC `AuthorizeResponse`. `matchedPolicyKeys` and
 * `matchedPolicyNames` list every matched policy (built-in ones included, the base permit
 * excluded), sorted by key; `matchedPolicyIds` and `policyVersionIds` list the stored ones
 * among them, in the same order (built-in policies have no database row).
 */
export type Verdict = AuthorizeResponse;

/** Reason given when the decision point does not know the agent. */
export const UNKNOWN_AGENT_REASON = 'Denied: unknown agent';
/** Reason given for every call of a disabled agent. */
export const AGENT_DISABLED_REASON = 'Denied: the agent is disabled';

const ALLOWED_BY_BASE: DecisionOutcome = Object.freeze({
  decision: 'ALLOW', reason: NO_FORBID_MATCHED, matchedPolicyKeys: [], matchedPolicyNames: [], matchedPolicyIds: [], policyVersionIds: [],
}) as DecisionOutcome;

/** Judges one call against an agent's prepared set. Never throws for a bad call: a DENY is a value. */
export function evaluate(set: PreparedPolicySet, input: AuthorizeInput): Verdict {
  const action = catalogAction(input.service, input.tool);
  const resource = resourceOf(input.service, input.args);
  const names = {
    principal: principalUid(input.member.id),
    action: action ? action.uid : actionUid(input.service, input.tool),
    resource: resource.uid,
    policyVersion: set.policyVersion,
  };
  if (set.agentStatus !== 'active') return { ...denied(AGENT_DISABLED_REASON), ...names };
  if (!action) return { ...denied(`Denied: unknown tool ${JSON.stringify(`${input.service}__${input.tool}`)}`), ...names };
  if (set.failure !== undefined) return { ...denied(`Denied: ${set.failure}`), ...names };
  const actionSet = set.actionSetFor(action);
  if ('failure' in actionSet) return { ...denied(`Denied: ${actionSet.failure}`), ...names };

  let outcome = rememberedOutcome(actionSet, input.member);
  if (outcome === undefined) {
    const answer = askCedar(actionSet.cedarId, set, action, input, resource);
    if (answer.type === 'failure') {
      return { ...denied(`Denied: the call could not be evaluated: ${answer.errors.map((e) => e.message).join('; ')}`), ...names };
    }
    outcome = outcomeOf(set, answer.response, input.member.status);
    rememberOutcome(actionSet, input.member, outcome);
  }
  // Copies: a remembered outcome is shared by later verdicts.
  return {
    decision: outcome.decision,
    reason: outcome.reason,
    matchedPolicyKeys: outcome.matchedPolicyKeys.slice(),
    matchedPolicyNames: outcome.matchedPolicyNames.slice(),
    matchedPolicyIds: outcome.matchedPolicyIds.slice(),
    policyVersionIds: outcome.policyVersionIds.slice(),
    ...names,
  };
}

/** A DENY for a call whose agent has no policy set (unknown agent), with the names it would have used. */
export function denyWithoutPolicySet(input: AuthorizeInput, reason: string): Verdict {
  const action = catalogAction(input.service, input.tool);
  return {
    ...denied(reason),
    principal: principalUid(input.member.id),
    action: action ? action.uid : actionUid(input.service, input.tool),
    resource: resourceOf(input.service, input.args).uid,
    policyVersion: 0,
  };
}

function askCedar(cedarId: string, set: PreparedPolicySet, action: CatalogAction, input: AuthorizeInput, resource: { type: string; id: string }): cedar.AuthorizationAnswer {
  const principal = { type: PRINCIPAL_TYPE, id: input.member.id };
  const resourceUid = { type: resource.type, id: resource.id };
  return cedar.statefulIsAuthorized({
    principal,
    action: action.entity,
    resource: resourceUid,
    context: { tier: action.tier, ...clockContext(input.nowMs) },
    entities: [
      { uid: principal, attrs: { role: input.member.role, status: input.member.status, email: input.member.email }, parents: [set.agentUid] },
      set.agentEntity,
      { uid: resourceUid, attrs: {}, parents: [] },
    ],
    preparsedPolicySetId: cedarId,
  });
}

/** Cedar's answer in the product's terms: matched policies sorted by key, and the reason (exported for tests). */
export function outcomeOf(set: PreparedPolicySet, response: cedar.Response, memberStatus: string): DecisionOutcome {
  const { decision, diagnostics } = response;
  if (decision === 'allow' && diagnostics.errors.length === 0 && diagnostics.reason.length === 1 && diagnostics.reason[0] === BASE_POLICY_KEY) {
    return ALLOWED_BY_BASE;
  }
  // Cedar returns ids in no stable order; policies that failed to evaluate count as matched.
  const matchedKeys = [...new Set([...diagnostics.reason, ...diagnostics.errors.map((e) => e.policyId)])]
    .filter((key) => key !== BASE_POLICY_KEY)
    .sort(compareStrings);
  const outcome: DecisionOutcome = {
    decision: 'ALLOW', reason: NO_FORBID_MATCHED, matchedPolicyKeys: [], matchedPolicyNames: [], matchedPolicyIds: [], policyVersionIds: [],
  };
  for (const key of matchedKeys) {
    const meta = set.policies.get(key);
    outcome.matchedPolicyKeys.push(key);
    outcome.matchedPolicyNames.push(meta?.name ?? key);
    if (meta && !meta.builtIn) {
      outcome.matchedPolicyIds.push(meta.policyId);
      outcome.policyVersionIds.push(meta.versionId);
    }
  }
  if (diagnostics.errors.length > 0) {
    // Cedar skips a policy it cannot evaluate; for a forbid that would silently allow.
    const first = [...diagnostics.errors].sort((a, b) => compareStrings(a.policyId, b.policyId))[0]!;
    const name = set.policies.get(first.policyId)?.name ?? first.policyId;
    outcome.decision = 'DENY';
    outcome.reason = `Denied: policy ${JSON.stringify(name)} could not be evaluated: ${first.error.message}`;
  } else if (decision === 'deny') {
    outcome.decision = 'DENY';
    outcome.reason = denyReason(set, matchedKeys, memberStatus);
  }
  return outcome;
}

/** The member-status forbid speaks first, then the first matching forbid by key. */
function denyReason(set: PreparedPolicySet, matchedKeys: readonly string[], memberStatus: string): string {
  if (matchedKeys.includes(MEMBER_NOT_APPROVED_POLICY_KEY)) return memberStatusReason(memberStatus);
  for (const key of matchedKeys) {
    const meta = set.policies.get(key);
    if (meta?.effect !== 'forbid') continue;
    return meta.denyMessage?.trim() ? meta.denyMessage : `Denied by policy ${JSON.stringify(meta.name || meta.policyKey)}`;
  }
  return 'Denied: no policy permits this call';
}

/** Why a member who is not approved may not call tools, in the member's own terms. */
export function memberStatusReason(status: string): string {
  switch (status) {
    case 'pending': return 'Member is pending approval';
    case 'rejected': return 'Member was rejected by the agent owner';
    default: return `Member is not approved (status ${JSON.stringify(status)})`;
  }
}

/**
 * Time attributes of the context, in UTC for now (agent time zones come with time windows):
 * `now` in ms, `hour` 0–23, `dayOfWeek` 0–6 with 0 = Sunday. Arithmetic, no Date allocation.
 */
export function clockContext(nowMs: number): { now: number; hour: number; dayOfWeek: number } {
  const days = Math.floor(nowMs / 86_400_000);
  return {
    now: nowMs,
    hour: Math.floor((nowMs - days * 86_400_000) / 3_600_000),
    dayOfWeek: (((days + 4) % 7) + 7) % 7, // 1970-01-01 was a Thursday
  };
}

function denied(reason: string): DecisionOutcome {
  return { decision: 'DENY', reason, matchedPolicyKeys: [], matchedPolicyNames: [], matchedPolicyIds: [], policyVersionIds: [] };
}
