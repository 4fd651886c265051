import { readFileSync } from 'node:fs';

export type Tier = 'read' | 'write' | 'destructive';
export const TIERS: readonly Tier[] = ['read', 'write', 'destructive'];
export type OAuthKind = 'own_app' | 'managed';

export interface ParamSpec {
  type: 'string' | 'number' | 'boolean' | 'array' | 'object';
  required: boolean;
}

export interface CatalogTool {
  name: string;
  tier: Tier;
  description: string;
  params: Record<string, ParamSpec>;
}

export interface Connector {
  key: string;
  label: string;
  oauth: OAuthKind;
  remoteUrl: string;
  webhooks: boolean;
  entityTypes: string[];
  tools: CatalogTool[];
}

/** JSON Schema of a tool's arguments, as `tools/list` shows it. */
export interface ToolInputSchema {
  type: 'object';
  properties: Record<string, { type: string }>;
  required?: string[];
}

interface RawCatalog {
  connectors: Array<Connector & { source?: string; tools: Array<CatalogTool & { verified?: boolean }> }>;
}

const raw = JSON.parse(readFileSync(new URL('./catalog.json', import.meta.url), 'utf8')) as RawCatalog;

/** The 16 connectors and their 281 tools, in catalog order. */
export const connectors: readonly Connector[] = raw.connectors.map((c) => ({
  key: c.key,
  label: c.label,
  oauth: c.oauth,
  remoteUrl: c.remoteUrl,
  webhooks: c.webhooks,
  entityTypes: c.entityTypes,
  tools: c.tools.map((t) => ({ name: t.name, tier: t.tier, description: t.description, params: t.params })),
}));

const byKey = new Map(connectors.map((c) => [c.key, c]));
const toolIndex = new Map(connectors.map((c) => [c.key, new Map(c.tools.map((t) => [t.name, t]))]));

export function getConnector(key: string): Connector | undefined {
  return byKey.get(key);
}

export function isConnectorKey(key: string): boolean {
  return byKey.has(key);
}

export function getTool(service: string, tool: string): CatalogTool | undefined {
  return toolIndex.get(service)?.get(tool);
}

/**
 * The tools of `service` a policy naming `tools` and `tiers` covers, in catalog order: the
 * named tools and every tool of the named tiers; every tool of the service when both lists
 * are empty. Names the catalog does not have cover nothing.
 */
export function toolsCovered(service: string, tools: readonly string[], tiers: readonly string[]): string[] {
  const connector = byKey.get(service);
  if (!connector) return [];
  const everyTool = tools.length === 0 && tiers.length === 0;
  const named = new Set(tools);
  const namedTiers = new Set(tiers);
  return connector.tools.filter((t) => everyTool || named.has(t.name) || namedTiers.has(t.tier)).map((t) => t.name);
}

export function inputSchemaOf(tool: CatalogTool): ToolInputSchema {
  const properties: ToolInputSchema['properties'] = {};
  const required: string[] = [];
  for (const [name, spec] of Object.entries(tool.params)) {
    properties[name] = { type: spec.type };
    if (spec.required) required.push(name);
  }
  return required.length > 0 ? { type: 'object', properties, required } : { type: 'object', properties };
}

/** Separator between connector key and tool name on `/mcp`. */
export const TOOL_NAME_SEPARATOR = '__';

export function prefixedToolName(service: string, tool: string): string {
  return `${service}${TOOL_NAME_SEPARATOR}${tool}`;
}

/** Splits `<service>__<tool>`; undefined when the name has no known connector prefix. */
export function splitToolName(name: string): { service: string; tool: string } | undefined {
  const at = name.indexOf(TOOL_NAME_SEPARATOR);
  if (at <= 0) return undefined;
  const service = name.slice(0, at);
  const tool = name.slice(at + TOOL_NAME_SEPARATOR.length);
  if (!byKey.has(service) || tool.length === 0) return undefined;
  return { service, tool };
}
