import * as cedar from '@cedar-policy/cedar-wasm/nodejs';
import { actionUid, NO_FORBID_MATCHED, PatternRun, principalUid, PRINCIPAL_TYPE, resourceOf, type AuthorizeResponse, type MemberMsg } from '@portcullis/core';
import { catalogAction, type CatalogAction } from './action-index.ts';
import { BASE_POLICY_KEY, compareStrings, MEMBER_NOT_APPROVED_POLICY_KEY } from './compile.ts';
import { argValueOf } from './conditions.ts';
import { rememberedOutcome, rememberOutcome, type ActionConditions, type ActionPolicySet, type DecisionOutcome, type PreparedPolicySet } from './prepared-set.ts';
import type { SessionCounters } from './session-counters.ts';

/** One tool call to judge, already read from the wire. */
export interface AuthorizeInput {
  agentId: string;
  member: MemberMsg;
  service: string;
  tool: string;
  args: Record<string, unknown>;
  /** Evaluation time, whole milliseconds since the epoch. */
  nowMs: number;
  /**
   * The MCP session (`AuthorizeRequest.session_id`); absent or empty = no session, and then
   * no session limit applies to the call.
   */
  sessionId?: string;
}

export interface EvaluateOptions {
  /**
   * Allowed-call counters for session limits. Without them a session-limited policy never
   * applies (as for a call without a session). The serving path always passes the process's
   * counters; a simulation passes its own, fed in time order.
   */
  sessions?: SessionCounters;
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
/** Reason of a DENY of an agent that denies by default, when no permit (and no forbid) matched. */
export const DEFAULT_DENY_REASON = 'No permit policy matched; this agent denies by default';
/** Reason given for every call of a disabled agent. */
export const AGENT_DISABLED_REASON = 'Denied: the agent is disabled';

const ALLOWED_BY_BASE: DecisionOutcome = Object.freeze({
  decision: 'ALLOW', reason: NO_FORBID_MATCHED, matchedPolicyKeys: [], matchedPolicyNames: [], matchedPolicyIds: [], policyVersionIds: [],
}) as DecisionOutcome;

/**
 * Judges one call against an agent's prepared set. Never throws for a bad call: a DENY is a
 * value. With session-limited policies in play, the counts are read, Cedar asked and an ALLOW
 * recorded in one synchronous step, so concurrent calls of a session cannot both pass a limit.
 *
 * When the agent has shadow policies, the call is judged a second time by the set with them
 * enforced too (`set.shadow`): that verdict is reported as `shadowDecision` with the shadow
 * policies that decided it, and changes nothing else (decision 061). Session limits: the
 * shadow evaluation records its allowed calls for the shadow policies' keys only (the enforced
 * ones were counted by the enforced evaluation), so a shadow limit trips when it would have.
 */
export function evaluate(set: PreparedPolicySet, input: AuthorizeInput, options: EvaluateOptions = {}): Verdict {
  const verdict = evaluateEnforced(set, input, options);
  const shadow = set.shadow;
  if (shadow === undefined) return verdict;
  const sessions = options.sessions;
  const would = evaluateEnforced(shadow, input, sessions ? { sessions: shadowCounters(sessions, set.shadowKeys) } : {});
  const shadowPolicyKeys: string[] = [];
  const shadowPolicyIds: string[] = [];
  for (const key of would.matchedPolicyKeys) {
    if (!set.shadowKeys.has(key)) continue;
    shadowPolicyKeys.push(key);
    shadowPolicyIds.push(shadow.policies.get(key)?.policyId ?? '');
  }
  return { ...verdict, shadowDecision: would.decision, shadowPolicyKeys, shadowPolicyIds };
}

/** The counters as the shadow evaluation sees them: every count read, only shadow policies' counts recorded. */
function shadowCounters(sessions: SessionCounters, shadowKeys: ReadonlySet<string>): SessionCounters {
  return {
    read: (sessionId, keys) => sessions.read(sessionId, keys),
    recordAllowed(sessionId, keys) {
      const own = keys.filter((key) => shadowKeys.has(key));
      if (own.length > 0) sessions.recordAllowed(sessionId, own);
    },
    forget() {},
  };
}

function evaluateEnforced(set: PreparedPolicySet, input: AuthorizeInput, options: EvaluateOptions): Verdict {
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
    const sessionId = input.sessionId && options.sessions ? input.sessionId : undefined;
    const answer = askCedar(actionSet, set, action, input, resource, sessionId === undefined ? undefined : { sessions: options.sessions!, sessionId });
    if (answer.type === 'failure') {
      return { ...denied(`Denied: the call could not be evaluated: ${answer.errors.map((e) => e.message).join('; ')}`), ...names };
    }
    outcome = outcomeOf(set, answer.response, input.member.status);
    rememberOutcome(actionSet, input.member, outcome);
    const limited = actionSet.conditions?.limitedKeys;
    if (outcome.decision === 'ALLOW' && sessionId !== undefined && limited !== undefined && limited.length > 0) {
      options.sessions!.recordAllowed(sessionId, limited);
    }
  }
  // Copies: a remembered outcome is shared by later verdicts.
  const verdict: Verdict = {
    decision: outcome.decision,
    reason: outcome.reason,
    matchedPolicyKeys: outcome.matchedPolicyKeys.slice(),
    matchedPolicyNames: outcome.matchedPolicyNames.slice(),
    matchedPolicyIds: outcome.matchedPolicyIds.slice(),
    policyVersionIds: outcome.policyVersionIds.slice(),
    ...names,
  };
  if (outcome.approvalPolicyKeys !== undefined) {
    verdict.approvalPolicyKeys = outcome.approvalPolicyKeys.slice();
    verdict.approvalPolicyIds = outcome.approvalPolicyIds!.slice();
    verdict.approvalPolicyVersionIds = outcome.approvalPolicyVersionIds!.slice();
  }
  return verdict;
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

function askCedar(
  actionSet: ActionPolicySet, set: PreparedPolicySet, action: CatalogAction, input: AuthorizeInput,
  resource: { type: string; id: string }, session: { sessions: SessionCounters; sessionId: string } | undefined,
): cedar.AuthorizationAnswer {
  const principal = { type: PRINCIPAL_TYPE, id: input.member.id };
  const resourceUid = { type: resource.type, id: resource.id };
  const entities: cedar.EntityJson[] = [
    { uid: principal, attrs: { role: input.member.role, status: input.member.status, email: input.member.email }, parents: [set.agentUid] },
    set.agentEntity,
    { uid: resourceUid, attrs: {}, parents: [] },
  ];
  const context: Record<string, cedar.CedarValueJson> = { tier: action.tier, ...clockContext(input.nowMs) };
  if (actionSet.conditions) {
    const needs = actionSet.conditions;
    const facts = conditionFacts(needs, input, session);
    // Only the facts some policy of the set reads: each costs Cedar a JSON round trip.
    const read = { clock: needs.timeZones.length > 0, args: needs.argPaths.length > 0, matches: needs.regexRules.length > 0, session: needs.limitedKeys.length > 0 };
    for (const [name, entity] of Object.entries(facts)) {
      if (!read[name as keyof typeof read]) continue;
      context[name] = { __entity: { type: FACT_TYPES[name as keyof typeof FACT_TYPES], id: FACT_ID } };
      entities.push(entity);
    }
  }
  return cedar.statefulIsAuthorized({
    principal,
    action: action.entity,
    resource: resourceUid,
    context,
    entities,
    preparsedPolicySetId: actionSet.cedarId,
  });
}

/** Ids of the context's fact entities; one of each per request, so a fixed id will do. */
const FACT_ID = 'call';
const FACT_TYPES = { clock: 'Portcullis::Clock', args: 'Portcullis::Arguments', matches: 'Portcullis::Matches', session: 'Portcullis::Session' } as const;

/**
 * The context entities conditions read (`clock`, `args`, `matches`, `session`), each with
 * one tag per zone / path / regex rule / limited policy key. See `conditions.ts`.
 */
export function conditionFacts(
  conditions: ActionConditions, input: Pick<AuthorizeInput, 'args' | 'nowMs'>, session: { sessions: SessionCounters; sessionId: string } | undefined,
): Record<'clock' | 'args' | 'matches' | 'session', cedar.EntityJson> {
  const clock: Record<string, cedar.CedarValueJson> = {};
  for (const zone of conditions.timeZones) {
    const local = localClock(zone, input.nowMs);
    if (local) clock[zone] = local;
  }
  const args: Record<string, cedar.CedarValueJson> = {};
  for (const path of conditions.argPaths) {
    const value = argValueOf(argAt(input.args, path));
    if (value) args[path] = value; // a missing (or non-scalar) argument never matches
  }
  const matches: Record<string, cedar.CedarValueJson> = {};
  const patterns = new PatternRun();
  for (const rule of conditions.regexRules) {
    const value = argValueOf(argAt(input.args, rule.path));
    // A missing argument never matches; one the pattern may not run on fails closed.
    matches[rule.tag] = value === undefined ? false : rule.pattern.matches(value.text, patterns) ?? rule.whenNotRun;
  }
  const counts: Record<string, cedar.CedarValueJson> = {};
  if (session && conditions.limitedKeys.length > 0) {
    const read = session.sessions.read(session.sessionId, conditions.limitedKeys);
    conditions.limitedKeys.forEach((key, i) => { counts[key] = read[i] ?? 0; });
  }
  const entity = (type: string, tags: Record<string, cedar.CedarValueJson>): cedar.EntityJson => ({ uid: { type, id: FACT_ID }, attrs: {}, parents: [], tags });
  return {
    clock: entity(FACT_TYPES.clock, clock),
    args: entity(FACT_TYPES.args, args),
    matches: entity(FACT_TYPES.matches, matches),
    session: entity(FACT_TYPES.session, counts),
  };
}

/** The value at a dot path of the arguments (`options.branch`); undefined when any step is missing. */
export function argAt(args: Record<string, unknown>, path: string): unknown {
  let value: unknown = args;
  for (const name of path.split('.')) {
    if (typeof value !== 'object' || value === null || Array.isArray(value) || !Object.hasOwn(value, name)) return undefined;
    value = (value as Record<string, unknown>)[name];
  }
  return value;
}

const WEEKDAY_NUMBER: Readonly<Record<string, number>> = { Sun: 0, Mon: 1, Tue: 2, Wed: 3, Thu: 4, Fri: 5, Sat: 6 };
const formatters = new Map<string, Intl.DateTimeFormat>();
/** Last answer per zone: calls come in bursts within one minute. */
const lastLocal = new Map<string, { minuteMs: number; day: number; minute: number }>();

/**
 * Local weekday (0 = Sunday) and minute of the day in `timeZone` at `nowMs`, daylight saving
 * time included; undefined for a zone this runtime does not know (the window then never holds).
 */
export function localClock(timeZone: string, nowMs: number): { day: number; minute: number } | undefined {
  const minuteMs = Math.floor(nowMs / 60_000) * 60_000; // every zone in use today is offset by whole minutes
  const cached = lastLocal.get(timeZone);
  if (cached?.minuteMs === minuteMs) return { day: cached.day, minute: cached.minute };
  let format = formatters.get(timeZone);
  if (!format) {
    try {
      format = new Intl.DateTimeFormat('en-US', { timeZone, weekday: 'short', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
    } catch {
      return undefined;
    }
    formatters.set(timeZone, format);
  }
  let day = 0;
  let hour = 0;
  let minute = 0;
  for (const part of format.formatToParts(minuteMs)) {
    if (part.type === 'weekday') day = WEEKDAY_NUMBER[part.value] ?? 0;
    else if (part.type === 'hour') hour = Number(part.value) % 24;
    else if (part.type === 'minute') minute = Number(part.value);
  }
  const local = { day, minute: hour * 60 + minute };
  lastLocal.set(timeZone, { minuteMs, ...local });
  return local;
}

/** Cedar's answer in the product's terms: matched policies sorted by key, and the reason (exported for tests). */
export function outcomeOf(set: PreparedPolicySet, response: cedar.Response, memberStatus: string): DecisionOutcome {
  const { decision, diagnostics } = response;
  if (decision === 'allow' && diagnostics.errors.length === 0 && diagnostics.reason.length === 1 && diagnostics.reason[0] === BASE_POLICY_KEY) {
    return ALLOWED_BY_BASE;
  }
  if (decision === 'deny' && diagnostics.errors.length === 0 && diagnostics.reason.length === 0 && set.defaultDecision === 'deny') {
    return { ...denied(DEFAULT_DENY_REASON) };
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
  } else if (approvalOf(set, outcome)) {
    // Allowed, but an approval policy is among the permits that allowed it: held for an owner (decision 063).
  } else if (set.defaultDecision === 'deny') {
    // No base permit: a permit record let the call through; name the first by key.
    const permit = matchedKeys.map((key) => set.policies.get(key)).find((meta) => meta?.effect === 'permit');
    if (permit) outcome.reason = `Allowed by policy ${JSON.stringify(permit.name || permit.policyKey)}`;
  }
  return outcome;
}

/** Reason of an APPROVAL_REQUIRED verdict; the gateway answers the agent in its own words. */
export function approvalReason(policyName: string): string {
  return `Approval required by policy ${JSON.stringify(policyName)}`;
}

/**
 * Turns an allowed `outcome` into APPROVAL_REQUIRED when one of its matched policies is an
 * approval policy, naming them (sorted by key, as matched); false when none is. Only the
 * allowed outcomes Cedar decided with a record reach here, so agents without approval
 * policies pay one effect comparison per matched policy.
 */
function approvalOf(set: PreparedPolicySet, outcome: DecisionOutcome): boolean {
  let keys: string[] | undefined;
  for (const key of outcome.matchedPolicyKeys) {
    if (set.policies.get(key)?.effect === 'require_approval') (keys ??= []).push(key);
  }
  if (keys === undefined) return false;
  const metas = keys.map((key) => set.policies.get(key)!);
  outcome.decision = 'APPROVAL_REQUIRED';
  outcome.reason = approvalReason(metas[0]!.name || metas[0]!.policyKey);
  outcome.approvalPolicyKeys = keys;
  outcome.approvalPolicyIds = metas.map((m) => m.policyId);
  outcome.approvalPolicyVersionIds = metas.map((m) => m.versionId);
  return true;
}

/** The member-status forbid speaks first, then the first matching forbid by key. */
function denyReason(set: PreparedPolicySet, matchedKeys: readonly string[], memberStatus: string): string {
  if (matchedKeys.includes(MEMBER_NOT_APPROVED_POLICY_KEY)) return memberStatusReason(memberStatus);
  for (const key of matchedKeys) {
    const meta = set.policies.get(key);
    if (meta?.effect !== 'forbid') continue;
    return meta.denyMessage?.trim() ? meta.denyMessage : `Denied by policy ${JSON.stringify(meta.name || meta.policyKey)}`;
  }
  return set.defaultDecision === 'deny' ? DEFAULT_DENY_REASON : 'Denied: no policy permits this call';
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
 * Time attributes of the context, in UTC (time windows read `context.clock` in their own zone):
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
