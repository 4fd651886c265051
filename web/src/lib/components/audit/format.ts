import type { AuditEntry } from '$lib/api/types.ts';

const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
const compact = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit' });

/** A timestamp in the reader's locale and time zone; `—` when absent. */
export function formatTime(iso: string | null | undefined): string {
  if (!iso) return '—';
  const at = new Date(iso);
  return Number.isNaN(at.getTime()) ? iso : dateTime.format(at);
}

/** A timestamp for dense tables: no year, seconds kept. */
export function formatCompactTime(iso: string): string {
  const at = new Date(iso);
  return Number.isNaN(at.getTime()) ? iso : compact.format(at);
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
 * `service` of an entry that records an `/mcp` request other than a tool call (initialize,
 * tools/list, `HTTP DELETE`… refused for a disabled agent; decision 001): audited, but not a call.
 */
export const MCP_PROTOCOL_SERVICE = 'mcp';

/** Whether the entry records a tool call (of a known tool or not), as call counters count them. */
export function isToolCall(entry: Pick<AuditEntry, 'service'>): boolean {
  return entry.service !== MCP_PROTOCOL_SERVICE;
}

/** What the entry targeted, in one cell: `github__get_me`, an unknown tool name as sent, or `initialize (MCP request)`. */
export function targetLabel(entry: Pick<AuditEntry, 'service' | 'tool'>): string {
  if (!isToolCall(entry)) return `${entry.tool} (MCP request)`;
  return entry.service ? `${entry.service}__${entry.tool}` : entry.tool;
}
