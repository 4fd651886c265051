/**
 * The editor's form state and its two-way mapping to the API's policy body (DESIGN §3,
 * decision 011 for conditions). The form keeps what the inputs hold (strings, switches for
 * optional conditions); `draftOf` builds exactly the body a save, preview or simulate sends.
 */
import type { ArgRule, ArgScalar, Policy, PolicyDraft, PolicyEffect, PolicyMode, PolicyTier, Weekday } from '$lib/api/types.ts';

export const TIERS: PolicyTier[] = ['read', 'write', 'destructive'];
export const WEEKDAYS: Array<{ key: Weekday; label: string }> = [
  { key: 'mon', label: 'Mon' }, { key: 'tue', label: 'Tue' }, { key: 'wed', label: 'Wed' }, { key: 'thu', label: 'Thu' },
  { key: 'fri', label: 'Fri' }, { key: 'sat', label: 'Sat' }, { key: 'sun', label: 'Sun' },
];

export type ArgOp = ArgRule['op'];
export type ArgKind = 'string' | 'number' | 'boolean';

/** One argument rule as typed: `value` is the text of the value, the values (comma-separated) or the pattern. */
export interface ArgRuleForm { path: string; op: ArgOp; kind: ArgKind; value: string }

export interface PolicyForm {
  name: string;
  policyKey: string;
  service: string;
  effect: PolicyEffect;
  tiers: PolicyTier[];
  tools: string[];
  principalType: 'all_members' | 'members';
  memberIds: string[];
  timeWindowOn: boolean;
  days: Weekday[];
  start: string;
  end: string;
  timeZone: string;
  sessionLimitOn: boolean;
  maxCalls: number | null;
  resourcesOn: boolean;
  resourceMatch: 'in' | 'not_in';
  resourceIds: string[];
  args: ArgRuleForm[];
  denyMessage: string;
  enabled: boolean;
  /** `shadow`: evaluated and audited, never enforced (decision 061). */
  mode: PolicyMode;
}

function browserTimeZone(): string {
  try { return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC'; } catch { return 'UTC'; }
}

export function emptyForm(service = ''): PolicyForm {
  return {
    name: '', policyKey: '', service, effect: 'forbid', tiers: [], tools: [],
    principalType: 'all_members', memberIds: [],
    timeWindowOn: false, days: ['mon', 'tue', 'wed', 'thu', 'fri'], start: '09:00', end: '17:00', timeZone: browserTimeZone(),
    sessionLimitOn: false, maxCalls: 10,
    resourcesOn: false, resourceMatch: 'in', resourceIds: [],
    args: [], denyMessage: '', enabled: true, mode: 'enforce',
  };
}

function kindOf(value: ArgScalar): ArgKind {
  return typeof value === 'number' ? 'number' : typeof value === 'boolean' ? 'boolean' : 'string';
}

function scalarOf(text: string, kind: ArgKind): ArgScalar {
  if (kind === 'number') return text.trim() === '' ? Number.NaN : Number(text);
  if (kind === 'boolean') return text.trim().toLowerCase() === 'true';
  return text;
}

function argFormOf(rule: ArgRule): ArgRuleForm {
  switch (rule.op) {
    case 'equals': return { path: rule.path, op: 'equals', kind: kindOf(rule.value), value: String(rule.value) };
    case 'oneOf': return { path: rule.path, op: 'oneOf', kind: rule.values[0] === undefined ? 'string' : kindOf(rule.values[0]), value: rule.values.map(String).join(', ') };
    case 'prefix': return { path: rule.path, op: 'prefix', kind: 'string', value: rule.value };
    case 'regex': return { path: rule.path, op: 'regex', kind: 'string', value: rule.pattern };
  }
}

function argRuleOf(form: ArgRuleForm): ArgRule {
  const path = form.path.trim();
  switch (form.op) {
    case 'equals': return { path, op: 'equals', value: scalarOf(form.value, form.kind) };
    case 'oneOf': return { path, op: 'oneOf', values: form.value.split(',').map((v) => v.trim()).filter((v) => v !== '').map((v) => scalarOf(v, form.kind)) };
    case 'prefix': return { path, op: 'prefix', value: form.value };
    case 'regex': return { path, op: 'regex', pattern: form.value };
  }
}

export function formOf(policy: Policy): PolicyForm {
  const c = policy.conditions ?? {};
  const base = emptyForm(policy.service);
  return {
    ...base,
    name: policy.name,
    policyKey: policy.policyKey,
    effect: policy.effect,
    tiers: [...policy.tiers],
    tools: [...policy.listedTools],
    principalType: policy.principal.type,
    memberIds: policy.principal.type === 'members' ? [...policy.principal.ids] : [],
    ...(c.timeWindow ? { timeWindowOn: true, days: [...c.timeWindow.days], start: c.timeWindow.start, end: c.timeWindow.end, timeZone: c.timeWindow.timeZone } : {}),
    ...(c.sessionLimit ? { sessionLimitOn: true, maxCalls: c.sessionLimit.maxCalls } : {}),
    ...(c.resources ? { resourcesOn: true, resourceMatch: c.resources.match, resourceIds: [...c.resources.ids] } : {}),
    args: (c.args ?? []).map(argFormOf),
    denyMessage: policy.denyMessage ?? '',
    enabled: policy.enabled,
    mode: policy.mode,
  };
}

/** The body the API takes. Days keep the week's order so the preview does not change with click order. */
export function draftOf(form: PolicyForm): PolicyDraft {
  const conditions: NonNullable<PolicyDraft['conditions']> = {};
  if (form.timeWindowOn) {
    conditions.timeWindow = {
      days: WEEKDAYS.map((d) => d.key).filter((d) => form.days.includes(d)),
      start: form.start, end: form.end, timeZone: form.timeZone.trim(),
    };
  }
  if (form.sessionLimitOn) conditions.sessionLimit = { maxCalls: form.maxCalls ?? Number.NaN };
  if (form.resourcesOn) conditions.resources = { match: form.resourceMatch, ids: [...form.resourceIds] };
  if (form.args.length > 0) conditions.args = form.args.map(argRuleOf);
  const draft: PolicyDraft = {
    name: form.name.trim(),
    service: form.service,
    effect: form.effect,
    tiers: TIERS.filter((t) => form.tiers.includes(t)),
    tools: [...form.tools],
    principal: form.principalType === 'all_members' ? { type: 'all_members' } : { type: 'members', ids: [...form.memberIds] },
    denyMessage: form.denyMessage.trim() === '' ? null : form.denyMessage,
    enabled: form.enabled,
    mode: form.mode,
  };
  if (form.policyKey.trim() !== '') draft.policyKey = form.policyKey.trim();
  if (Object.keys(conditions).length > 0) draft.conditions = conditions;
  return draft;
}

/** A problem the API named, with the field it names (without a `draft.` prefix from simulate). */
export interface Problem { field?: string; message: string }

/** Whether `problem` belongs to `field` or something inside it (`tools` owns `tools.3`). */
export function belongsTo(problem: Problem, field: string): boolean {
  return problem.field !== undefined && (problem.field === field || problem.field.startsWith(`${field}.`));
}
