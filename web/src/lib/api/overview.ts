/**
 * Typed calls of the operations console: the home overview and the audit histogram (both
 * computed by the audit service over the caller's visible agents), and the option lists of the
 * audit explorer's dropdowns. Every call throws `ApiError` on a non-2xx answer.
 */
import { call, http, query, type Answer } from './client.ts';
import type { AuditFilters } from './audit.ts';
import { connectorsMeta, listAgents } from './agents.ts';
import { policiesApi } from './policies.ts';
import type { Agent } from './types.ts';

/** One time bucket of a series, as the page draws it: `[start, end)` with its calls split by decision. */
export interface SeriesBucket { start: string; end: string; calls: number; allowed: number; denied: number }

/** A series as the API answers it: every bucket of the range, oldest first, empty ones included. */
type WireSeries = Answer<'/api/audit/histogram'>;

/** The wire buckets with their ends and allowed counts. */
function seriesOf(wire: WireSeries): SeriesBucket[] {
  return wire.buckets.map((b) => ({
    start: b.start, end: new Date(Date.parse(b.start) + wire.bucketSeconds * 1000).toISOString(),
    calls: b.calls, denied: b.denies, allowed: b.calls - b.denies,
  }));
}

/** GET /api/audit/histogram: the entries GET /api/audit lists for the filters, per time bucket. */
export interface AuditHistogram { buckets: SeriesBucket[]; bucketSeconds: number }

export async function auditHistogram(filters: AuditFilters): Promise<AuditHistogram> {
  const wire = await call(http.GET('/api/audit/histogram', { params: { query: query(filters) } }));
  return { buckets: seriesOf(wire), bucketSeconds: wire.bucketSeconds };
}

type WireOverview = Answer<'/api/dashboard/overview'>;
/** A request to join an agent the caller owns, waiting for approval. */
export type PendingApproval = WireOverview['pendingApprovals']['members'][number];

/** GET /api/dashboard/overview: the home page's figures for one range (decision 037), the series with bucket ends. */
export type Overview = Omit<WireOverview, 'series'> & { series: SeriesBucket[]; bucketSeconds: number };

export async function getOverview(range: { from?: string; to?: string }): Promise<Overview> {
  const wire = await call(http.GET('/api/dashboard/overview', { params: { query: query(range) } }));
  return { ...wire, series: seriesOf(wire.series), bucketSeconds: wire.series.bucketSeconds };
}

/** A choice of a filter dropdown: the value sent to the API and what the reader sees. */
export interface FilterOption { value: string; label: string }

/** Agents whose audit the caller can read (owner or approved member), by name (the audit `agent` filter matches names). */
export async function agentOptions(): Promise<Agent[]> {
  const agents: Agent[] = [];
  for (let offset = 0; offset < 2_000; offset += 100) {
    const page = await listAgents({ limit: 100, offset, sortBy: 'name', sortDir: 'asc' });
    agents.push(...page.agents);
    if (page.agents.length < 100 || offset + page.agents.length >= page.total) break;
  }
  // A pending member reads none of an agent's audit: offering it would filter to nothing.
  return agents.filter((a) => a.membership.status === 'approved');
}

export async function serviceOptions(): Promise<FilterOption[]> {
  const { connectors } = await connectorsMeta();
  return connectors.map((c) => ({ value: c.key, label: c.label })).sort((a, b) => a.label.localeCompare(b.label));
}

/**
 * The policies of the agents the caller owns (members do not see policies, decision 012), by
 * name with their agent, valued by policy id as the audit `policy` filter takes it.
 */
export async function policyOptions(agents: Agent[]): Promise<FilterOption[]> {
  const owned = agents.filter((a) => a.membership.role === 'owner' && a.membership.status === 'approved' && a.policyCount > 0);
  const lists = await Promise.all(owned.map(async (agent) => {
    const { policies } = await policiesApi.list(agent.id, { limit: 200, sortBy: 'name', sortDir: 'asc' });
    return policies.map((p) => ({ value: p.id, label: owned.length > 1 ? `${p.name} (${agent.name})` : p.name }));
  }));
  return lists.flat();
}
