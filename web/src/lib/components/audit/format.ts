import type { AuditEntry } from '$lib/api/types.ts';
import { formatDateTime } from '$lib/datetime.svelte.ts';

/** A timestamp by the dashboard's one formatter (local or UTC per the header toggle), seconds kept; `—` when absent. */
export function formatTime(iso: string | null | undefined): string {
  if (!iso) return '—';
  return formatDateTime(iso, 'seconds') || iso;
}

/** A timestamp for dense tables: no year (unless another one), seconds kept. */
export function formatCompactTime(iso: string): string {
  return formatDateTime(iso, 'seconds') || iso;
}

/** `GithubMCP::Repository::"acme/api"` → `acme/api`: the part a reader scans for (the full text stays in the details). */
export function shortResource(resource: string): string {
  const match = /::"((?:[^"\\]|\\.)*)"$/.exec(resource);
  return match ? match[1]! : resource;
}

export function formatDuration(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(2)} s`;
}

/**
 * The proxy's own Cedar actions (decision 071): an entry whose action is one of them, other than
 * `tools/call`, records an `/mcp` request that is not a tool call (initialize, tools/list,
 * `HTTP DELETE`… refused for a disabled agent; decision 001): audited, but not a call.
 */
const GATEWAY_ACTIONS = 'Portcullis::Action::';
const NO_CONNECTOR_CALL_ACTION = 'Portcullis::Action::"tools/call"';

/** Whether the entry records a tool call (of a known tool or not), as call counters count them (`isProtocolRequest` in core). */
export function isToolCall(entry: Pick<AuditEntry, 'action'>): boolean {
  return !entry.action.startsWith(GATEWAY_ACTIONS) || entry.action === NO_CONNECTOR_CALL_ACTION;
}

/** What the entry targeted, in one cell: `github__get_me`, an unknown tool name as sent, or `initialize (MCP request)`. */
export function targetLabel(entry: Pick<AuditEntry, 'service' | 'tool' | 'action'>): string {
  if (!isToolCall(entry)) return `${entry.tool} (MCP request)`;
  return entry.service ? `${entry.service}__${entry.tool}` : entry.tool;
}
