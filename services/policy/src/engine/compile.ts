import { actionUid, cedarNamespace, getConnector, getTool, PRINCIPAL_TYPE, TIERS, toolsCovered, type schema, type Tier } from '@portcullis/core';
import { validatePolicyStrict } from './cedar-schema.ts';
import { cedarLiteral, entityUidText } from './cedar-text.ts';
import { compileConditions, type ConditionNeeds } from './conditions.ts';

/**
 * Policy records → Cedar (pure). One record compiles to one Cedar policy annotated with
 * `@id("<policyKey>")`; an agent's set is the built-in policies plus every enabled record.
 */

export type PolicyEffect = schema.PolicyEffect;
export type PolicyPrincipal = schema.PolicyPrincipal;

/** What a policy says, as the REST API and the `policies` table hold it. */
export interface PolicyRecordInput {
  policyKey: string;
  name: string;
  service: string;
  effect: PolicyEffect;
  /** Tool names; together with `tiers`. Both empty = every tool of the service. */
  tools: string[];
  /** Tiers expanded from the catalog into the service's tools of that tier. */
  tiers: string[];
  principal: PolicyPrincipal;
  denyMessage?: string | null;
  enabled?: boolean;
  /**
   * Time window, session limit, resource and argument matches (`policyConditionsSchema` of
   * `@portcullis/core`); every one present must hold for the policy to apply. `{}`/null = none.
   */
  conditions?: Record<string, unknown> | null;
}

/** A row of `policies`: the record plus the ids audit entries cite. */
export interface StoredPolicyRecord extends PolicyRecordInput {
  id: string;
  enabled: boolean;
  currentVersionId: string | null;
  /** `shadow`: evaluated beside the verdict, never enforced (decision 061); absent = `enforce`. */
  mode?: schema.PolicyMode;
}

/**
 * `authoring`: a draft being written or saved; anything that does not match the catalog is
 * an error. `serving`: a stored record being loaded; catalog mismatches (a tool the catalog
 * no longer has) are warnings and are left out, so the rest of the policy still holds.
 */
export type CompileMode = 'authoring' | 'serving';

export interface PolicyCompilation {
  policyKey: string;
  /** The Cedar policy; empty when `errors` is not. */
  cedar: string;
  errors: string[];
  warnings: string[];
}

/** The annotation that marks an approval policy's Cedar permit (decision 063). */
export const APPROVAL_ANNOTATION = '@approval("required")';

/** Keys starting with this are the platform's own policies; records may not use them. */
export const RESERVED_KEY_PREFIX = 'portcullis.';
/** The base permit: with it, "no forbid policy matched" means ALLOW. */
export const BASE_POLICY_KEY = 'portcullis.base';
/** Denies every call of a member whose status is not `approved` (pending, rejected…). */
export const MEMBER_NOT_APPROVED_POLICY_KEY = 'portcullis.member-not-approved';

/** Cedar text of the built-in policies, by id (the base permit only when the agent allows by default). */
export const BUILTIN_POLICIES: Readonly<Record<string, string>> = {
  [BASE_POLICY_KEY]: `@id(${cedarLiteral(BASE_POLICY_KEY)})\npermit (principal, action, resource);`,
  [MEMBER_NOT_APPROVED_POLICY_KEY]:
    `@id(${cedarLiteral(MEMBER_NOT_APPROVED_POLICY_KEY)})\nforbid (principal, action, resource)\nwhen { principal.status != "approved" };`,
};

/** Display names of the built-in policies, as audit entries list them. */
export const BUILTIN_POLICY_NAMES: Readonly<Record<string, string>> = {
  [BASE_POLICY_KEY]: 'Allow unless forbidden',
  [MEMBER_NOT_APPROVED_POLICY_KEY]: 'Member must be approved',
};

/**
 * A record compiled once, from which Cedar text is rendered: whole (as stored and previewed)
 * or narrowed to one of its tools (what a call of that tool is evaluated against).
 */
export interface CompiledPolicyParts {
  policyKey: string;
  effect: PolicyEffect;
  /** `GithubMCP::Action` */
  actionType: string;
  /** The tools it applies to, in catalog order (tiers expanded). */
  tools: readonly string[];
  principalScope: string;
  /** The resource scope; always `resource` (resource conditions are clauses). */
  resourceScope: string;
  /**
   * Every `when { … }` / `unless { … }` clause, in order. All conditions go here (time
   * windows, session limits, resources, arguments): {@link readsOnlyPrincipalAndAction}
   * reads them to know whether a decision may be memoized.
   */
  clauses: string[];
  /** What the decision point must compute into the context for the conditions; undefined = none. */
  needs?: ConditionNeeds | undefined;
}

/**
 * Compiles one record (enabled or not) to its Cedar policy, with what is wrong with it. In
 * authoring mode the policy is also validated in Cedar's strict mode against the catalog's
 * schema; its errors (`cedar: …`) make the record unusable, its warnings are passed on.
 */
export function compilePolicy(record: PolicyRecordInput, options: { mode?: CompileMode } = {}): PolicyCompilation {
  const mode = options.mode ?? 'authoring';
  const { parts, errors, warnings } = compilePolicyParts(record, mode);
  const policyKey = typeof record.policyKey === 'string' ? record.policyKey : '';
  if (!parts) return { policyKey, cedar: '', errors, warnings };
  const cedar = renderPolicy(parts);
  if (mode === 'authoring') {
    const validation = validatePolicyStrict(record.service, policyKey, cedar);
    warnings.push(...validation.warnings);
    if (validation.errors.length > 0) return { policyKey, cedar: '', errors: [...errors, ...validation.errors], warnings };
  }
  return { policyKey, cedar, errors, warnings };
}

/** The parts of a record's policy, or undefined with `errors` saying why there are none. */
export function compilePolicyParts(record: PolicyRecordInput, mode: CompileMode): { parts: CompiledPolicyParts | undefined; errors: string[]; warnings: string[] } {
  const errors: string[] = [];
  const warnings: string[] = [];
  const mismatch = mode === 'authoring' ? errors : warnings;
  const policyKey = typeof record.policyKey === 'string' ? record.policyKey : '';

  if (policyKey.trim().length === 0) errors.push('policyKey must not be empty');
  else if (policyKey.startsWith(RESERVED_KEY_PREFIX)) errors.push(`policyKey must not start with "${RESERVED_KEY_PREFIX}" (reserved for built-in policies)`);
  if (record.effect !== 'forbid' && record.effect !== 'permit' && record.effect !== 'require_approval') {
    errors.push(`effect must be "forbid", "permit" or "require_approval", not ${JSON.stringify(record.effect)}`);
  }

  const tools = selectTools(record, errors, mismatch);
  const principal = compilePrincipal(record.principal, errors, mismatch);
  const conditions = compileConditions({ policyKey, service: record.service, tools, conditions: record.conditions }, errors, mismatch);
  if (errors.length > 0) return { parts: undefined, errors, warnings };
  return {
    parts: {
      policyKey,
      effect: record.effect,
      actionType: `${cedarNamespace(record.service)}::Action`,
      tools,
      principalScope: principal.scope,
      resourceScope: 'resource',
      clauses: [...(principal.clause ? [principal.clause] : []), ...conditions.clauses],
      needs: conditions.needs,
    },
    errors,
    warnings,
  };
}

/**
 * Cedar text of compiled parts. With `onlyTool` (one of `parts.tools`) the action scope is
 * that tool alone: for a call of that tool the policy means exactly the same, and Cedar
 * evaluates it faster.
 */
export function renderPolicy(parts: CompiledPolicyParts, onlyTool?: string): string {
  const tools = onlyTool === undefined ? parts.tools : [onlyTool];
  const actionScope = tools.length === 1
    ? `action == ${entityUidText(parts.actionType, tools[0]!)}`
    : tools.length === 0 ? 'action in []' : `action in [\n${tools.map((t) => `    ${entityUidText(parts.actionType, t)}`).join(',\n')}\n  ]`;
  const clauses = parts.clauses.map((c) => `\n${c}`).join('');
  // An approval policy is a Cedar permit the decision point reads as "allowed once approved":
  // a forbid still wins, and on a default-deny agent it is what lets the call through (decision 063).
  const effect = parts.effect === 'require_approval' ? `${APPROVAL_ANNOTATION}\npermit` : parts.effect;
  return `@id(${cedarLiteral(parts.policyKey)})\n${effect} (\n  ${parts.principalScope},\n  ${actionScope},\n  ${parts.resourceScope}\n)${clauses};`;
}

/**
 * Whether the policy's outcome depends only on the principal (its id and attributes) and the
 * action: no constraint on the resource, no mention of `context` or `resource` in any
 * clause. A member id that happens to contain those words only makes this say false, never
 * wrongly true. Such decisions can be memoized per member.
 */
export function readsOnlyPrincipalAndAction(parts: CompiledPolicyParts): boolean {
  return parts.resourceScope === 'resource' && parts.needs === undefined && !parts.clauses.some((c) => /\b(context|resource)\b/.test(c));
}

/** Raised by {@link compilePolicyText} when a record cannot be compiled; `errors` says why. */
export class PolicyCompileError extends Error {
  override readonly name = 'PolicyCompileError';
  constructor(readonly policyKey: string, readonly errors: readonly string[]) {
    super(`Policy "${policyKey}" cannot be compiled: ${errors.join('; ')}`);
  }
}

/**
 * The Cedar text of one record, as a version snapshot stores it. Throws
 * {@link PolicyCompileError} when the record has errors in authoring mode.
 */
export function compilePolicyText(record: PolicyRecordInput): string {
  const compiled = compilePolicy(record, { mode: 'authoring' });
  if (compiled.errors.length > 0) throw new PolicyCompileError(compiled.policyKey, compiled.errors);
  return compiled.cedar;
}

/** What evaluation needs to know about each policy of a set, by Cedar id (= policy key). */
export interface PolicyMeta {
  policyKey: string;
  name: string;
  effect: PolicyEffect;
  /** Database id; empty for built-in policies. */
  policyId: string;
  /** The version snapshot in force; empty for built-in policies and unversioned rows. */
  versionId: string;
  denyMessage: string | null;
  builtIn: boolean;
}

/**
 * What a call no policy decides gets: `allow` (the base permit is in the set: "no forbid
 * matched" = ALLOW) or `deny` (no base permit: only permit records let calls through).
 */
export type DefaultDecision = 'allow' | 'deny';

/** An agent's policy set, compiled. */
export interface AgentPolicySource {
  defaultDecision: DefaultDecision;
  policies: Map<string, PolicyMeta>;
  /** The records' parts that apply to each action, by action uid (`GithubMCP::Action::"x"`), in key order. */
  partsByAction: Map<string, CompiledPolicyParts[]>;
  /** Records that could not be compiled, each naming the policy. Non-empty = the set must not be used. */
  errors: string[];
  warnings: string[];
}

/**
 * The built-in policies plus every enabled record, compiled in serving mode. With
 * `defaultDecision: 'deny'` the base permit is left out.
 */
export function compileAgentPolicySet(records: readonly StoredPolicyRecord[], options: { defaultDecision?: DefaultDecision } = {}): AgentPolicySource {
  const defaultDecision = options.defaultDecision === 'deny' ? 'deny' : 'allow';
  const policies = new Map<string, PolicyMeta>();
  for (const [policyKey, name] of Object.entries(BUILTIN_POLICY_NAMES)) {
    if (policyKey === BASE_POLICY_KEY && defaultDecision === 'deny') continue;
    policies.set(policyKey, { policyKey, name, effect: policyKey === BASE_POLICY_KEY ? 'permit' : 'forbid', policyId: '', versionId: '', denyMessage: null, builtIn: true });
  }
  const partsByAction = new Map<string, CompiledPolicyParts[]>();
  const errors: string[] = [];
  const warnings: string[] = [];
  const enabled = records.filter((r) => r.enabled).sort((a, b) => compareStrings(a.policyKey, b.policyKey));
  for (const record of enabled) {
    const label = `Policy ${JSON.stringify(record.name || record.policyKey)}`;
    const { parts, errors: recordErrors, warnings: recordWarnings } = compilePolicyParts(record, 'serving');
    for (const w of recordWarnings) warnings.push(`${label}: ${w}`);
    if (!parts) {
      errors.push(`${label} cannot be compiled: ${recordErrors.join('; ')}`);
      continue;
    }
    if (policies.has(record.policyKey)) {
      errors.push(`${label}: policy key ${JSON.stringify(record.policyKey)} is used twice`);
      continue;
    }
    for (const tool of parts.tools) {
      const action = actionUid(record.service, tool);
      const list = partsByAction.get(action);
      if (list) list.push(parts);
      else partsByAction.set(action, [parts]);
    }
    policies.set(record.policyKey, {
      policyKey: record.policyKey,
      name: record.name,
      effect: record.effect,
      policyId: record.id,
      versionId: record.currentVersionId ?? '',
      denyMessage: record.denyMessage ?? null,
      builtIn: false,
    });
  }
  return { defaultDecision, policies, partsByAction, errors, warnings };
}

/** Code-unit order: the same everywhere, unlike `localeCompare`. */
export function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The service's tools named by `tools` and `tiers`, in catalog order; all of them when both are empty. */
function selectTools(record: PolicyRecordInput, errors: string[], mismatch: string[]): string[] {
  const connector = getConnector(record.service);
  if (!connector) {
    errors.push(`unknown service ${JSON.stringify(record.service)}`);
    return [];
  }
  if (!Array.isArray(record.tools)) errors.push('tools must be a list of tool names');
  if (!Array.isArray(record.tiers)) errors.push('tiers must be a list of tiers');
  const tools = Array.isArray(record.tools) ? record.tools : [];
  const tiers = Array.isArray(record.tiers) ? record.tiers : [];

  const mismatchesBefore = mismatch.length;
  for (const tool of tools) {
    if (!getTool(record.service, tool)) mismatch.push(`unknown tool ${JSON.stringify(tool)} for service ${JSON.stringify(record.service)}`);
  }
  for (const tier of tiers) {
    if (!TIERS.includes(tier as Tier)) mismatch.push(`unknown tier ${JSON.stringify(tier)} (tiers are read, write, destructive)`);
  }

  const selected = toolsCovered(record.service, tools, tiers);
  // Say so only when no unknown tool or tier already explains it.
  if (selected.length === 0 && mismatch.length === mismatchesBefore) {
    mismatch.push(`the policy names no tool of ${connector.label}, so it never applies`);
  }
  return selected;
}

/** The principal scope, plus a `when` clause when several members are listed. */
function compilePrincipal(principal: PolicyPrincipal, errors: string[], mismatch: string[]): { scope: string; clause?: string } {
  if (principal?.type === 'all_members') return { scope: 'principal' };
  if (principal?.type === 'members') {
    const ids = Array.isArray(principal.ids) ? principal.ids : undefined;
    if (!ids || ids.some((id) => typeof id !== 'string' || id.length === 0)) {
      errors.push('principal.ids must be a list of member ids');
      return { scope: 'principal' };
    }
    const unique = [...new Set(ids)];
    if (unique.length === 0) {
      mismatch.push('principal lists no members, so the policy never applies');
      return { scope: 'principal', clause: 'when { false }' };
    }
    // A policy scope takes one entity (`principal == X`); a set needs a condition.
    if (unique.length === 1) return { scope: `principal == ${entityUidText(PRINCIPAL_TYPE, unique[0]!)}` };
    return { scope: 'principal', clause: `when { [${unique.map((id) => entityUidText(PRINCIPAL_TYPE, id)).join(', ')}].contains(principal) }` };
  }
  errors.push('principal must be {"type":"all_members"} or {"type":"members","ids":[…]}');
  return { scope: 'principal' };
}
