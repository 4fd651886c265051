import { getConnector, getTool, TIERS } from '@portcullis/core';
import type { PolicyBody, PolicyContent } from './policy-types.ts';

/** One thing wrong with a policy body: the field path (as `details.field` names it) and why. */
export interface PolicyIssue { field: string; message: string }

const SLUG_MAX = 60;

/**
 * The key a policy gets when its body names none: the name as a lowercase slug
 * ("Block deletes at night!" → `block-deletes-at-night`), `policy` when nothing is left.
 */
export function slugOf(name: string): string {
  const slug = name.normalize('NFKD').replace(/[\u0300-\u036f]/g, '').toLowerCase()
    .replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, SLUG_MAX).replace(/-+$/, '');
  return slug || 'policy';
}

/** `base`, else `base-2`, `base-3`, … — the first not in `taken`. */
export function uniqueKey(base: string, taken: ReadonlySet<string>): string {
  if (!taken.has(base)) return base;
  for (let n = 2; ; n++) {
    const candidate = `${base}-${n}`;
    if (!taken.has(candidate)) return candidate;
  }
}

/**
 * What in the body does not match the catalog: an unknown service, or a tool that service
 * does not have. Field paths index the body as sent (`tools.2`).
 */
export function catalogIssues(body: Pick<PolicyBody, 'service' | 'tools'>): PolicyIssue[] {
  if (!getConnector(body.service)) return [{ field: 'service', message: `Unknown connector "${body.service}".` }];
  const issues: PolicyIssue[] = [];
  (body.tools ?? []).forEach((tool, i) => {
    if (!getTool(body.service, tool)) issues.push({ field: `tools.${i}`, message: `Connector "${body.service}" has no tool "${tool}".` });
  });
  return issues;
}

/** Member ids in `principal.ids` that are not (non-rejected) members of the agent. */
export function principalIssues(body: Pick<PolicyBody, 'principal'>, memberIds: ReadonlySet<string>): PolicyIssue[] {
  if (body.principal.type !== 'members') return [];
  const issues: PolicyIssue[] = [];
  body.principal.ids.forEach((id, i) => {
    if (!memberIds.has(id)) issues.push({ field: `principal.ids.${i}`, message: `"${id}" is not a member of this agent.` });
  });
  return issues;
}

/**
 * The body as stored: tools in catalog order and tiers in tier order without repeats,
 * listed members without repeats, a blank deny message as none, `enabled` as given or `enabledDefault`,
 * `mode` as given or `modeDefault`.
 */
export function contentOf(body: PolicyBody, policyKey: string, enabledDefault: boolean, modeDefault: PolicyContent['mode'] = 'enforce'): PolicyContent {
  const connector = getConnector(body.service);
  const tools = new Set(body.tools ?? []);
  const tiers = new Set(body.tiers ?? []);
  return {
    policyKey,
    name: body.name,
    service: body.service,
    effect: body.effect,
    tools: connector ? connector.tools.map((t) => t.name).filter((t) => tools.has(t)) : [...tools],
    tiers: TIERS.filter((t) => tiers.has(t)),
    principal: body.principal.type === 'members' ? { type: 'members', ids: [...new Set(body.principal.ids)] } : { type: 'all_members' },
    conditions: body.conditions ?? {},
    denyMessage: body.denyMessage ? body.denyMessage : null,
    enabled: body.enabled ?? enabledDefault,
    mode: body.mode ?? modeDefault,
  };
}

/**
 * The field a PDP compile error is about, when it starts with one (`principal.ids: …`);
 * `policy` otherwise (the error is about the record as a whole).
 */
export function fieldOfCompileError(error: string): string {
  const match = /^([A-Za-z][\w]*(?:\.[\w]+)*)(?::| must| is| has| cannot)/.exec(error);
  return match ? match[1]! : 'policy';
}
