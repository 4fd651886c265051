import * as cedar from '@cedar-policy/cedar-wasm/nodejs';
import { AGENT_TYPE, type AuthorizeResponse, type LinearPattern } from '@portcullis/core';
import type { CatalogAction } from './action-index.ts';
import {
  BASE_POLICY_KEY, BUILTIN_POLICIES, compileAgentPolicySet, readsOnlyPrincipalAndAction, renderPolicy,
  type CompiledPolicyParts, type DefaultDecision, type PolicyMeta, type StoredPolicyRecord,
} from './compile.ts';

/** Everything the decision point reads about one agent, as the store delivers it. */
export interface AgentPolicySnapshot {
  agentId: string;
  /** `active` or `disabled`; a disabled agent's calls are all denied. */
  agentStatus: string;
  /** The agent's `policy_version`, bumped by every policy change. */
  policyVersion: number;
  /** The agent's policies; disabled ones are skipped. */
  policies: readonly StoredPolicyRecord[];
  /** `agents.default_decision`; absent = `allow`. With `deny`, only permit records let calls through. */
  defaultDecision?: DefaultDecision;
}

/** What a verdict says apart from the names of the call (principal, action, resource). */
export type DecisionOutcome = Pick<AuthorizeResponse, 'decision' | 'reason' | 'matchedPolicyKeys' | 'matchedPolicyNames' | 'matchedPolicyIds' | 'policyVersionIds'>
  & Pick<AuthorizeResponse, 'approvalPolicyKeys' | 'approvalPolicyIds' | 'approvalPolicyVersionIds'>;

/** A remembered outcome for one member, valid while the member's attributes are these. */
interface MemberOutcome {
  role: string;
  status: string;
  email: string;
  outcome: DecisionOutcome;
}

/** The Cedar set that calls of one action are evaluated against. */
export interface ActionPolicySet {
  /** Id of the set in Cedar's (thread-local) store. */
  readonly cedarId: string;
  /**
   * Outcomes by member id, when every policy of the set reads only the principal and the
   * action (see `readsOnlyPrincipalAndAction`): then Cedar's answer for a member cannot
   * change until the set does, and asking again would only cost time. Undefined otherwise.
   */
  readonly memo: Map<string, MemberOutcome> | undefined;
  /** What the decision point computes into the context for the set's conditions; undefined = nothing. */
  readonly conditions: ActionConditions | undefined;
}

/** The union of the conditions' needs of one action set, ready to evaluate. */
export interface ActionConditions {
  /** Distinct IANA zones read through `context.clock`. */
  readonly timeZones: readonly string[];
  /** Distinct argument paths read through `context.args`. */
  readonly argPaths: readonly string[];
  /** Regex rules, each answered in `context.matches`. */
  readonly regexRules: readonly PreparedRegexRule[];
  /** Keys of the session-limited policies: their counts go in `context.session`, and an ALLOW is recorded for them. */
  readonly limitedKeys: readonly string[];
}

/** A regex rule ready to run (see `conditionFacts` in `evaluate.ts`). */
export interface PreparedRegexRule {
  readonly tag: string;
  readonly path: string;
  readonly pattern: LinearPattern;
  /**
   * The answer when the pattern may not run (a value longer than `PATTERN_TEXT_MAX`, or the
   * call's pattern budget spent): the one that fails closed, i.e. `true` for a forbid (it
   * applies) and `false` for a permit (it does not permit). Decision 020. An approval policy
   * applies too: the call waits for an owner rather than going through (decision 063).
   */
  readonly whenNotRun: boolean;
}

/** Most members remembered per action; past it the memo starts over. */
const MEMO_MAX_MEMBERS = 10_000;

/** Cedar ids of the sets holding only the built-in policies: shared by every action no record names. */
const BUILTINS_ONLY_SET_IDS: Readonly<Record<DefaultDecision, string>> = { allow: 'portcullis.builtins', deny: 'portcullis.builtins.deny-by-default' };
const builtinsOnlyReady = new Set<DefaultDecision>();

/** The built-in policies of an agent set: without the base permit when it denies by default. */
function builtinPolicies(defaultDecision: DefaultDecision): Record<string, string> {
  const policies: Record<string, string> = { ...BUILTIN_POLICIES };
  if (defaultDecision === 'deny') delete policies[BASE_POLICY_KEY];
  return policies;
}

function builtinsOnlySet(defaultDecision: DefaultDecision): string {
  const id = BUILTINS_ONLY_SET_IDS[defaultDecision];
  if (!builtinsOnlyReady.has(defaultDecision)) {
    const answer = cedar.preparsePolicySet(id, { staticPolicies: builtinPolicies(defaultDecision) });
    if (answer.type === 'failure') throw new Error(`built-in policies do not parse: ${answer.errors.map((e) => e.message).join('; ')}`);
    builtinsOnlyReady.add(defaultDecision);
  }
  return id;
}

function isBuiltinsOnlySet(cedarId: string): boolean {
  return cedarId === BUILTINS_ONLY_SET_IDS.allow || cedarId === BUILTINS_ONLY_SET_IDS.deny;
}

/** The union of what `parts` need in the context; undefined when none has conditions. */
function actionConditions(parts: readonly CompiledPolicyParts[]): ActionConditions | undefined {
  if (parts.every((p) => p.needs === undefined)) return undefined;
  const timeZones = new Set<string>();
  const argPaths = new Set<string>();
  const regexRules: PreparedRegexRule[] = [];
  const limitedKeys: string[] = [];
  for (const p of parts) {
    if (!p.needs) continue;
    for (const zone of p.needs.timeZones) timeZones.add(zone);
    for (const path of p.needs.argPaths) argPaths.add(path);
    for (const rule of p.needs.regexRules) regexRules.push({ tag: rule.tag, path: rule.path, pattern: rule.compiled, whenNotRun: p.effect !== 'permit' });
    if (p.needs.sessionLimit !== undefined) limitedKeys.push(p.policyKey);
  }
  return { timeZones: [...timeZones], argPaths: [...argPaths], regexRules, limitedKeys };
}

/**
 * One agent's policy set, compiled once and evaluated many times.
 *
 * Cedar evaluates every policy of a set on every call (a few µs each), so a call is not
 * evaluated against the agent's whole set: for each action there is a Cedar set of the
 * built-in policies plus only the records that name that action, each narrowed to it
 * (`action == …`), parsed on the first call of the action and kept. An action no record
 * names uses the shared built-ins-only set.
 */
export class PreparedPolicySet {
  readonly agentId: string;
  readonly agentStatus: string;
  readonly policyVersion: number;
  /** Prefix of this set's ids in Cedar's store; unique per build. */
  readonly preparsedId: string;
  /** Set when the policies could not be compiled: every call is denied with this reason. */
  readonly failure: string | undefined;
  /** Metadata of every policy in the set, by Cedar id (= policy key). */
  readonly policies: ReadonlyMap<string, PolicyMeta>;
  readonly agentUid: cedar.TypeAndId;
  /** The agent's Cedar entity, shared by every request. */
  readonly agentEntity: cedar.EntityJson;
  /** Records that compiled with a caveat (a tool the catalog no longer has…). */
  readonly warnings: readonly string[];
  /** `deny`: no base permit; a call no permit matches is denied. */
  readonly defaultDecision: DefaultDecision;
  /**
   * The agent's set with its shadow policies enforced too, evaluated beside this one to say
   * what they would have decided (decision 061); undefined when the agent has no enabled
   * shadow policy, so such agents pay nothing for the feature.
   */
  readonly shadow: PreparedPolicySet | undefined;
  /** Keys of the enabled shadow policies (those `shadow` holds on top of this set). */
  readonly shadowKeys: ReadonlySet<string>;

  readonly #partsByAction: ReadonlyMap<string, CompiledPolicyParts[]>;
  readonly #actionSets = new Map<string, ActionPolicySet>();
  #released = false;

  /** `withShadow`: the shadow view, every enabled policy enforced, shadow ones included. */
  constructor(snapshot: AgentPolicySnapshot, preparsedId: string, options: { withShadow?: boolean } = {}) {
    const shadowRecords = snapshot.policies.filter((p) => p.mode === 'shadow' && p.enabled);
    const records = options.withShadow || shadowRecords.length === 0 ? snapshot.policies : snapshot.policies.filter((p) => p.mode !== 'shadow');
    const source = compileAgentPolicySet(records, { defaultDecision: snapshot.defaultDecision ?? 'allow' });
    this.shadowKeys = new Set(shadowRecords.map((p) => p.policyKey));
    this.shadow = !options.withShadow && shadowRecords.length > 0 ? new PreparedPolicySet(snapshot, `${preparsedId}#shadow`, { withShadow: true }) : undefined;
    this.defaultDecision = source.defaultDecision;
    this.agentId = snapshot.agentId;
    this.agentStatus = snapshot.agentStatus;
    this.policyVersion = snapshot.policyVersion;
    this.preparsedId = preparsedId;
    this.failure = source.errors.length > 0 ? `the agent's policies cannot be used: ${source.errors.join('; ')}` : undefined;
    this.policies = source.policies;
    this.warnings = source.warnings;
    this.#partsByAction = source.partsByAction;
    this.agentUid = Object.freeze({ type: AGENT_TYPE, id: snapshot.agentId });
    this.agentEntity = Object.freeze({ uid: this.agentUid, attrs: {}, parents: [] });
  }

  /** The Cedar set for calls of `action`, parsed on first use; `{failure}` when it cannot be had. */
  actionSetFor(action: CatalogAction): ActionPolicySet | { failure: string } {
    const known = this.#actionSets.get(action.uid);
    if (known !== undefined) return known;
    if (this.#released) return { failure: 'the policy set was replaced while the call was evaluated; retry' };
    const parts = this.#partsByAction.get(action.uid);
    if (!parts) {
      // The built-ins read only the principal's attributes.
      const shared: ActionPolicySet = { cedarId: builtinsOnlySet(this.defaultDecision), memo: new Map(), conditions: undefined };
      this.#actionSets.set(action.uid, shared);
      return shared;
    }
    const staticPolicies = builtinPolicies(this.defaultDecision);
    for (const p of parts) staticPolicies[p.policyKey] = renderPolicy(p, action.entity.id);
    const cedarId = `${this.preparsedId}/${action.uid}`;
    const answer = cedar.preparsePolicySet(cedarId, { staticPolicies });
    if (answer.type === 'failure') return { failure: `the agent's policies cannot be parsed: ${answer.errors.map((e) => e.message).join('; ')}` };
    let conditions: ActionConditions | undefined;
    try {
      conditions = actionConditions(parts);
    } catch (err) {
      return { failure: `the agent's policies cannot be used: ${err instanceof Error ? err.message : String(err)}` };
    }
    // Conditions read the context (time, arguments, counters): such outcomes are never remembered.
    const memo = conditions === undefined && parts.every(readsOnlyPrincipalAndAction) ? new Map<string, MemberOutcome>() : undefined;
    const actionSet: ActionPolicySet = { cedarId, memo, conditions };
    this.#actionSets.set(action.uid, actionSet);
    return actionSet;
  }

  /**
   * Frees this set's Cedar memory; it must not be evaluated again. Cedar has no call that
   * drops a parsed set, so each id is overwritten with an empty set (which denies everything).
   */
  release(): void {
    this.shadow?.release();
    this.#released = true;
    for (const { cedarId } of this.#actionSets.values()) {
      if (!isBuiltinsOnlySet(cedarId)) cedar.preparsePolicySet(cedarId, { staticPolicies: {} });
    }
    this.#actionSets.clear();
  }
}

/** The remembered outcome of `member` in `actionSet`, if any and still valid. */
export function rememberedOutcome(actionSet: ActionPolicySet, member: { id: string; role: string; status: string; email: string }): DecisionOutcome | undefined {
  const known = actionSet.memo?.get(member.id);
  return known !== undefined && known.status === member.status && known.role === member.role && known.email === member.email ? known.outcome : undefined;
}

/** Remembers `outcome` for `member` when the action set allows it. */
export function rememberOutcome(actionSet: ActionPolicySet, member: { id: string; role: string; status: string; email: string }, outcome: DecisionOutcome): void {
  const memo = actionSet.memo;
  if (!memo) return;
  if (memo.size >= MEMO_MAX_MEMBERS) memo.clear();
  memo.set(member.id, { role: member.role, status: member.status, email: member.email, outcome });
}

/** Compiles an agent's snapshot; `preparsedId` must be new for every build. */
export function preparePolicySet(snapshot: AgentPolicySnapshot, preparsedId: string): PreparedPolicySet {
  return new PreparedPolicySet(snapshot, preparsedId);
}
