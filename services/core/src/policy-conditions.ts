import { z } from 'zod';
import { LinearPattern } from './patterns.ts';

/**
 * The conditions a policy record may carry (`conditions` in the REST body, the `policies`
 * table and the PDP's records). Every condition present must hold for the policy to apply;
 * a forbid whose conditions do not hold simply does not match. Validation of what refers to
 * the catalog (argument paths, entity ids) happens when the record compiles.
 */

export const WEEKDAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;
export type Weekday = (typeof WEEKDAYS)[number];

const clockTime = z.string().regex(/^([01]\d|2[0-3]):[0-5]\d$/, 'must be HH:MM (24-hour)');

function isTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

/**
 * The policy applies on `days`, from `start` (inclusive) to `end` (exclusive), wall-clock time
 * in `timeZone` (IANA). `end` before `start` wraps past midnight: the window opens on a listed
 * day and closes the next morning. Outside the window the policy does not apply.
 */
export const timeWindowSchema = z.strictObject({
  days: z.array(z.enum(WEEKDAYS)).min(1).max(7).refine((d) => new Set(d).size === d.length, 'must not repeat a day'),
  start: clockTime,
  end: clockTime,
  timeZone: z.string().min(1).max(64).refine(isTimeZone, 'must be an IANA time zone, e.g. Europe/Paris'),
}).refine((w) => w.start !== w.end, { message: 'start and end must differ', path: ['end'] });

/**
 * The policy applies once the MCP session has already made `maxCalls` calls of the tools it
 * covers that were let through: a forbid with `maxCalls: 3` allows three calls per session
 * and denies the fourth and later ones.
 */
export const sessionLimitSchema = z.strictObject({
  maxCalls: z.number().int().min(0).max(1_000_000),
});

/**
 * The policy applies when the call targets (`in`) or does not target (`not_in`) one of these
 * harvested entities (ids as the Cedar resource names them, e.g. `acme/api`).
 */
export const resourcesConditionSchema = z.strictObject({
  match: z.enum(['in', 'not_in']),
  ids: z.array(z.string().min(1).max(500)).min(1).max(1_000),
});

const argPath = z.string().min(1).max(200).regex(/^[A-Za-z_$][\w$-]*(\.[A-Za-z_$][\w$-]*)*$/, 'must be a dot path of argument names, e.g. owner or options.branch');
const argScalar = z.union([z.string().max(1_000), z.number().finite(), z.boolean()]);

const patternText = z.string().min(1).max(500);
/** A `regex` rule's pattern, as written: RE2 must compile it within the bounds of `patterns.ts`. */
const compilablePattern = patternText.superRefine((pattern, ctx) => {
  const compiled = LinearPattern.compile(pattern);
  if (!compiled.ok) ctx.addIssue({ code: 'custom', message: compiled.problem });
});

/** One test on one argument; all of a policy's argument rules must hold. */
function argRuleSchemaWith(pattern: z.ZodType<string>) {
  return z.discriminatedUnion('op', [
    z.strictObject({ path: argPath, op: z.literal('equals'), value: argScalar }),
    z.strictObject({ path: argPath, op: z.literal('oneOf'), values: z.array(argScalar).min(1).max(1_000) }),
    z.strictObject({ path: argPath, op: z.literal('prefix'), value: z.string().min(1).max(1_000) }),
    z.strictObject({ path: argPath, op: z.literal('regex'), pattern }),
  ]);
}

function policyConditionsSchemaWith(pattern: z.ZodType<string>) {
  return z.strictObject({
    timeWindow: timeWindowSchema.optional(),
    sessionLimit: sessionLimitSchema.optional(),
    resources: resourcesConditionSchema.optional(),
    args: z.array(argRuleSchemaWith(pattern)).min(1).max(50).optional(),
  });
}

export const argRuleSchema = argRuleSchemaWith(compilablePattern);

/** Conditions as written (bodies, drafts, the records the decision point compiles): every pattern must compile. */
export const policyConditionsSchema = policyConditionsSchemaWith(compilablePattern);

/**
 * The same shape without compiling patterns: for describing conditions already stored (API
 * answers), which a pattern the engine now refuses must not turn into a server error.
 */
export const storedPolicyConditionsSchema = policyConditionsSchemaWith(patternText);

export type TimeWindow = z.infer<typeof timeWindowSchema>;
export type SessionLimit = z.infer<typeof sessionLimitSchema>;
export type ResourcesCondition = z.infer<typeof resourcesConditionSchema>;
export type ArgRule = z.infer<typeof argRuleSchema>;
export type PolicyConditions = z.infer<typeof policyConditionsSchema>;
