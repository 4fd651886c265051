import { getConnector } from './catalog/catalog.ts';

/**
 * Cedar names, as DESIGN.md fixes them. Every audit entry records the exact strings
 * produced here, so they are part of the product's contract.
 */

/** `github` → `GithubMCP`: one Cedar namespace per connector. */
export function cedarNamespace(service: string): string {
  return service.charAt(0).toUpperCase() + service.slice(1) + 'MCP';
}

/** Cedar string literal: JSON escaping is a valid Cedar escaping for these strings. */
export function cedarString(value: string): string {
  return JSON.stringify(value);
}

export function entityUid(type: string, id: string): string {
  return `${type}::${cedarString(id)}`;
}

export const PRINCIPAL_TYPE = 'Portcullis::Member';
export const AGENT_TYPE = 'Portcullis::Agent';

export function principalUid(memberId: string): string {
  return entityUid(PRINCIPAL_TYPE, memberId);
}

export function actionUid(service: string, tool: string): string {
  return entityUid(`${cedarNamespace(service)}::Action`, tool);
}

/**
 * How a call's target entity is read from its arguments: the first rule whose
 * arguments are all present (non-empty strings) wins; `id` joins them with `/`.
 */
interface ResourceRule {
  type: string;
  args: string[];
}

const resourceRules: Record<string, ResourceRule[]> = {
  github: [{ type: 'Repository', args: ['owner', 'repo'] }, { type: 'Organization', args: ['org'] }, { type: 'Organization', args: ['owner'] }],
  slack: [{ type: 'Channel', args: ['channel_id'] }, { type: 'Canvas', args: ['canvas_id'] }],
  linear: [{ type: 'Team', args: ['teamId'] }, { type: 'Team', args: ['team'] }, { type: 'Project', args: ['project'] }],
  stripe: [{ type: 'Customer', args: ['customer'] }, { type: 'Subscription', args: ['subscription'] }, { type: 'Product', args: ['product'] }],
  huggingface: [{ type: 'Model', args: ['model_id'] }, { type: 'Dataset', args: ['dataset_id'] }],
  sentry: [{ type: 'Project', args: ['organizationSlug', 'projectSlug'] }, { type: 'Organization', args: ['organizationSlug'] }],
  supabase: [{ type: 'Project', args: ['project_id'] }, { type: 'Organization', args: ['organization_id'] }],
  cloudflare: [{ type: 'Worker', args: ['scriptName'] }, { type: 'D1Database', args: ['database_id'] }, { type: 'KvNamespace', args: ['namespace_id'] }],
  pagerduty: [{ type: 'Service', args: ['service_id'] }, { type: 'Team', args: ['team_id'] }, { type: 'Incident', args: ['incident_id'] }],
  notion: [{ type: 'Page', args: ['page_id'] }],
  atlassian: [{ type: 'JiraProject', args: ['projectIdOrKey'] }, { type: 'Site', args: ['cloudId'] }],
  gdrive: [{ type: 'File', args: ['fileId'] }],
  gmail: [{ type: 'Label', args: ['labelId'] }],
  gcalendar: [{ type: 'Calendar', args: ['calendarId'] }],
  airtable: [{ type: 'Table', args: ['baseId', 'tableId'] }, { type: 'Base', args: ['baseId'] }],
  vercel: [{ type: 'Project', args: ['projectId'] }, { type: 'Team', args: ['teamId'] }],
};

/**
 * The entity types a connector's calls may target besides `<Label>MCP::Service`, e.g.
 * `GithubMCP::Repository`, distinct, in rule order; empty for a service without resource rules.
 */
export function resourceTypesOf(service: string): string[] {
  const ns = cedarNamespace(service);
  return [...new Set((resourceRules[service] ?? []).map((rule) => `${ns}::${rule.type}`))];
}

/** The Cedar resource a call targets, e.g. `GithubMCP::Repository::"acme/api"`. */
export function resourceOf(service: string, args: Record<string, unknown>): { type: string; id: string; uid: string } {
  const ns = cedarNamespace(service);
  for (const rule of resourceRules[service] ?? []) {
    const parts = rule.args.map((name) => args[name]);
    if (parts.every((p) => typeof p === 'string' && p.length > 0)) {
      const id = parts.join('/');
      return { type: `${ns}::${rule.type}`, id, uid: entityUid(`${ns}::${rule.type}`, id) };
    }
  }
  const id = getConnector(service)?.key ?? service;
  return { type: `${ns}::Service`, id, uid: entityUid(`${ns}::Service`, id) };
}
