import { getConnector, getTool, LinearPattern, policyConditionsSchema, resourceTypesOf, type ArgRule, type PolicyConditions, type TimeWindow, type Weekday } from '@portcullis/core';
import { cedarLiteral, entityUidText } from './cedar-text.ts';

/**
 * A record's `conditions` → Cedar `when`/`unless` clauses (pure), plus what the decision
 * point must put in the context for them (docs/decisions/011-policy-conditions.md):
 *
 * - `context.clock`   entity `Portcullis::Clock`, one tag per IANA zone: `{day, minute}`
 *                     (local weekday 0 = Sunday, minute of the day 0–1439)
 * - `context.args`    entity `Portcullis::Arguments`, one tag per argument path read:
 *                     `{kind: "string"|"number"|"boolean", text}` (scalars only)
 * - `context.matches` entity `Portcullis::Matches`, one Bool tag per regex rule
 *                     (`<policyKey>#args.<i>`), computed by the decision point
 * - `context.session` entity `Portcullis::Session`, one Long tag per session-limited policy
 *                     key: the session's allowed calls of the tools that policy covers
 *
 * Tags (not record attributes) because zones, paths and keys vary per agent while the
 * schema is fixed: `hasTag`/`getTag` validate in strict mode for any key.
 */

/** What the decision point computes for a policy's conditions. Undefined parts: not needed. */
export interface ConditionNeeds {
  /** IANA zones whose local day and minute the policy reads. */
  timeZones: string[];
  /** Argument paths whose values the policy reads (equals, oneOf, prefix). */
  argPaths: string[];
  /** Regex rules the decision point evaluates; the policy reads `context.matches[tag]`. */
  regexRules: RegexRule[];
  /** `maxCalls` of the session limit, if any. */
  sessionLimit: number | undefined;
}

export interface RegexRule {
  tag: string;
  path: string;
  pattern: string;
  /** The pattern compiled once, when the record is (the schema check above already proved it compiles). */
  compiled: LinearPattern;
}

export const NO_CONDITION_NEEDS: ConditionNeeds = Object.freeze({ timeZones: [], argPaths: [], regexRules: [], sessionLimit: undefined }) as ConditionNeeds;

/** Local weekday numbers as the clock tags carry them: 0 = Sunday. */
const DAY_NUMBER: Record<Weekday, number> = { sun: 0, mon: 1, tue: 2, wed: 3, thu: 4, fri: 5, sat: 6 };

export interface ConditionsInput {
  policyKey: string;
  service: string;
  /** The tools the policy covers (tiers expanded). */
  tools: readonly string[];
  conditions: unknown;
}

/**
 * Compiles `conditions`. Shape errors (from `policyConditionsSchema`) are `errors`, each
 * prefixed with its field path (`conditions.timeWindow.timeZone: …`). Catalog mismatches
 * (an argument path a covered tool does not have, resources on a service without resource
 * rules) go to `mismatch`: errors when authoring, warnings when serving.
 */
export function compileConditions(input: ConditionsInput, errors: string[], mismatch: string[]): { clauses: string[]; needs: ConditionNeeds | undefined } {
  if (input.conditions === undefined || input.conditions === null) return { clauses: [], needs: undefined };
  const parsed = policyConditionsSchema.safeParse(input.conditions);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) errors.push(`${['conditions', ...issue.path.map(String)].join('.')}: ${issue.message}`);
    return { clauses: [], needs: undefined };
  }
  const conditions: PolicyConditions = parsed.data;
  const clauses: string[] = [];
  const needs: ConditionNeeds = { timeZones: [], argPaths: [], regexRules: [], sessionLimit: undefined };

  if (conditions.timeWindow) {
    clauses.push(timeWindowClause(conditions.timeWindow));
    needs.timeZones.push(conditions.timeWindow.timeZone);
  }
  if (conditions.resources) {
    const types = resourceTypesOf(input.service);
    if (types.length === 0 && getConnector(input.service)) mismatch.push(`conditions.resources: service ${JSON.stringify(input.service)} has no resource types, so a call never targets one`);
    const matchesListed = resourceMatch(types, conditions.resources.ids);
    clauses.push(conditions.resources.match === 'in' ? `when { ${matchesListed} }` : `unless { ${matchesListed} }`);
  }
  conditions.args?.forEach((rule, index) => {
    checkArgPath(input, rule.path, index, mismatch);
    if (rule.op === 'regex') {
      const tag = `${input.policyKey}#args.${index}`;
      const compiled = LinearPattern.compile(rule.pattern);
      if (!compiled.ok) errors.push(`conditions.args.${index}.pattern: ${compiled.problem}`);
      else needs.regexRules.push({ tag, path: rule.path, pattern: rule.pattern, compiled: compiled.pattern });
      clauses.push(`when { context.matches.hasTag(${cedarLiteral(tag)}) && context.matches.getTag(${cedarLiteral(tag)}) }`);
    } else {
      if (!needs.argPaths.includes(rule.path)) needs.argPaths.push(rule.path);
      clauses.push(argClause(rule));
    }
  });
  if (conditions.sessionLimit) {
    needs.sessionLimit = conditions.sessionLimit.maxCalls;
    const key = cedarLiteral(input.policyKey);
    clauses.push(`when { context.session.hasTag(${key}) && context.session.getTag(${key}) >= ${conditions.sessionLimit.maxCalls} }`);
  }
  const empty = needs.timeZones.length + needs.argPaths.length + needs.regexRules.length === 0 && needs.sessionLimit === undefined && clauses.length === 0;
  return { clauses, needs: empty ? undefined : needs };
}

/**
 * `[days]` from `start` (inclusive) to `end` (exclusive), local time. A window with `end`
 * before `start` belongs to the day it opens on: it holds from `start` on a listed day and
 * until `end` on the day after a listed day.
 */
function timeWindowClause(window: TimeWindow): string {
  const zone = cedarLiteral(window.timeZone);
  const clock = `context.clock.getTag(${zone})`;
  const start = minuteOfDay(window.start);
  const end = minuteOfDay(window.end);
  const days = window.days.map((d) => DAY_NUMBER[d]).sort((a, b) => a - b);
  const daySet = `[${days.join(', ')}].contains(${clock}.day)`;
  if (start < end) return `when { context.clock.hasTag(${zone}) && ${daySet} && ${clock}.minute >= ${start} && ${clock}.minute < ${end} }`;
  const nextDays = days.map((d) => (d + 1) % 7).sort((a, b) => a - b);
  const tail = end === 0 ? '' : ` || ([${nextDays.join(', ')}].contains(${clock}.day) && ${clock}.minute < ${end})`;
  return `when { context.clock.hasTag(${zone}) && ((${daySet} && ${clock}.minute >= ${start})${tail}) }`;
}

function minuteOfDay(hhmm: string): number {
  const [h, m] = hhmm.split(':').map(Number);
  return h! * 60 + m!;
}

/**
 * The call's resource is one of `ids` of one of the service's resource types. One homogeneous
 * set per type behind an `is` test: strict validation refuses a set mixing entity types.
 */
function resourceMatch(types: readonly string[], ids: readonly string[]): string {
  if (types.length === 0) return 'false';
  const unique = [...new Set(ids)];
  const perType = types.map((type) => `(resource is ${type} && [${unique.map((id) => entityUidText(type, id)).join(', ')}].contains(resource))`);
  return perType.length === 1 ? perType[0]! : `(${perType.join(' || ')})`;
}

/** The kind and canonical text an argument value is compared by; numbers and booleans compare by value. */
export function argValueOf(value: unknown): { kind: 'string' | 'number' | 'boolean'; text: string } | undefined {
  if (typeof value === 'string') return { kind: 'string', text: value };
  if (typeof value === 'number') return Number.isFinite(value) ? { kind: 'number', text: String(value) } : undefined;
  if (typeof value === 'boolean') return { kind: 'boolean', text: String(value) };
  return undefined;
}

function argClause(rule: Exclude<ArgRule, { op: 'regex' }>): string {
  const path = cedarLiteral(rule.path);
  const arg = `context.args.getTag(${path})`;
  const guard = `context.args.hasTag(${path})`;
  switch (rule.op) {
    case 'equals': {
      const v = argValueOf(rule.value)!;
      return `when { ${guard} && ${arg}.kind == "${v.kind}" && ${arg}.text == ${cedarLiteral(v.text)} }`;
    }
    case 'oneOf': {
      const byKind = new Map<string, string[]>();
      for (const value of rule.values) {
        const v = argValueOf(value)!;
        const texts = byKind.get(v.kind) ?? [];
        if (!texts.includes(v.text)) texts.push(v.text);
        byKind.set(v.kind, texts);
      }
      const alternatives = [...byKind].map(([kind, texts]) => `(${arg}.kind == "${kind}" && [${texts.map(cedarLiteral).join(', ')}].contains(${arg}.text))`);
      return `when { ${guard} && (${alternatives.join(' || ')}) }`;
    }
    case 'prefix':
      return `when { ${guard} && ${arg}.kind == "string" && ${arg}.text like ${likePrefix(rule.value)} }`;
  }
}

/** A Cedar `like` pattern matching strings that start with `prefix`: `*` is the wildcard, `\*` a star. */
function likePrefix(prefix: string): string {
  const literal = cedarLiteral(prefix);
  return `${literal.slice(0, -1).replaceAll('*', '\\*')}*"`;
}

/**
 * The path's first name must be a parameter of every tool the policy covers; a dotted path
 * goes inside a parameter, which must then be an object.
 */
function checkArgPath(input: ConditionsInput, path: string, index: number, mismatch: string[]): void {
  const [first, ...rest] = path.split('.');
  const lacking: string[] = [];
  for (const toolName of input.tools) {
    const param = getTool(input.service, toolName)?.params[first!];
    if (!param || (rest.length > 0 && param.type !== 'object')) lacking.push(toolName);
  }
  if (lacking.length === 0) return;
  const shown = lacking.slice(0, 5).map((t) => JSON.stringify(t)).join(', ') + (lacking.length > 5 ? ` and ${lacking.length - 5} more` : '');
  mismatch.push(`conditions.args.${index}.path: argument ${JSON.stringify(path)} is not a parameter of tool${lacking.length > 1 ? 's' : ''} ${shown} of ${JSON.stringify(input.service)}`);
}
