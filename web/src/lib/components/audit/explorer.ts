// The audit explorer's view as the URL holds it: the API's filters, a relative time preset,
// paging. Links from the home overview and clicks on cells and bars all write this query.
import { DEFAULT_LIMIT, filterParams, viewFromQuery, type AuditFilters, type AuditView } from '../../api/audit.ts';

/** Relative ranges, each kept in the URL as `range=<key>` so a reload means "the last hour" again. */
export const PRESETS = [
  { key: '15m', label: '15 m', ms: 15 * 60_000 },
  { key: '1h', label: '1 h', ms: 3_600_000 },
  { key: '24h', label: '24 h', ms: 24 * 3_600_000 },
  { key: '7d', label: '7 d', ms: 7 * 24 * 3_600_000 },
  { key: '30d', label: '30 d', ms: 30 * 24 * 3_600_000 },
] as const;
export type PresetKey = (typeof PRESETS)[number]['key'];

export function presetOf(key: string | null | undefined): (typeof PRESETS)[number] | undefined {
  return PRESETS.find((p) => p.key === key);
}

/** The explorer's view: the API view plus the preset that stands for `from` / `to` while set. */
export interface ExplorerView extends AuditView { range?: PresetKey }

export function explorerViewFromQuery(params: URLSearchParams): ExplorerView {
  const view: ExplorerView = viewFromQuery(params);
  const preset = presetOf(params.get('range'));
  if (preset) {
    view.range = preset.key;
    delete view.filters.from;
    delete view.filters.to;
  }
  return view;
}

/** The URL query of a view (defaults left out, so a plain `/audit` stays plain). */
export function queryOfExplorerView(view: ExplorerView): string {
  const params = filterParams(view.range ? { ...view.filters, from: undefined, to: undefined } : view.filters);
  if (view.range) params.set('range', view.range);
  if (view.limit !== DEFAULT_LIMIT) params.set('limit', String(view.limit));
  if (view.offset > 0) params.set('offset', String(view.offset));
  return params.toString();
}

/** The `/audit` link of a filter set (the overview's click-throughs use this). */
export function auditHref(filters: AuditFilters & { range?: PresetKey }): string {
  const { range, ...rest } = filters;
  const query = queryOfExplorerView({ filters: rest, range, limit: DEFAULT_LIMIT, offset: 0 });
  return query ? `/audit?${query}` : '/audit';
}

/** The filters sent to the API: a preset becomes an absolute `from` (up to now). */
export function resolvedFilters(view: ExplorerView, now = Date.now()): AuditFilters {
  const preset = presetOf(view.range);
  return preset ? { ...view.filters, from: new Date(now - preset.ms).toISOString() } : { ...view.filters };
}

/** Filters a chip can show and remove, in the order chips appear. */
export const CHIP_KEYS = ['agentId', 'agent', 'service', 'tool', 'result', 'member', 'policy'] as const;
export type ChipKey = (typeof CHIP_KEYS)[number];
export const CHIP_LABELS: Record<ChipKey | 'from' | 'to' | 'range', string> = {
  agentId: 'Agent', agent: 'Agent name has', service: 'Service', tool: 'Tool', result: 'Decision', member: 'Member', policy: 'Policy', from: 'From', to: 'To', range: 'Last',
};

/**
 * The audit log at one entry: its own millisecond (and member and tool, when known), with
 * `entry=<id>` for the explorer to open that row. Without a time, the member's entries.
 */
export function entryHref(entry: { entryId: string; timestamp?: string; memberId?: string; tool?: string; service?: string }): string {
  const params = new URLSearchParams();
  if (entry.timestamp) { params.set('from', entry.timestamp); params.set('to', entry.timestamp); }
  if (entry.service) params.set('service', entry.service);
  if (entry.tool) params.set('tool', entry.tool);
  if (entry.memberId) params.set('member', entry.memberId);
  params.set('entry', entry.entryId);
  return `/audit?${params}`;
}
