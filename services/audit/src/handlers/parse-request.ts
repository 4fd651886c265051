import { parseAuditBound, type AuditFilterMsg, type ExportRequest, type HistogramRequest, type OverviewRequest, type QueryRequest, type StatsRequest } from '@portcullis/core';
import type { AuditFilter } from '../store/audit-filter.ts';
import type { AuditPage, AuditStatsFilter, OverviewFilter } from '../store/audit-store.ts';

/** A request field is malformed; maps to gRPC INVALID_ARGUMENT with this message. */
export class InvalidArgumentError extends Error {
  override readonly name = 'InvalidArgumentError';
}

/** Default and maximum page size of `Query` (the spec's `limit`). */
export const QUERY_LIMIT_MAX = 500;
const MAX_AGENT_IDS = 10_000;
const MAX_ID_LENGTH = 256;
const MAX_TEXT_LENGTH = 512;
/** The range `DateTime64(3)` can hold; bounds outside it are clamped, which changes no result. */
const EARLIEST = Date.UTC(1900, 0, 1);
const LATEST = Date.UTC(2299, 11, 31, 23, 59, 59, 999);

/**
 * Parses an audit range bound (`parseAuditBound`: ISO 8601, inclusive at the precision
 * written — `to=…T21:12Z` ends at 21:12:59.999, a bare date at the day's last millisecond).
 * Empty means "no bound".
 */
export function parseInstant(value: string, field: string, bound: 'from' | 'to'): Date | undefined {
  if (value === '') return undefined;
  const instant = parseAuditBound(value, bound);
  if (instant === undefined) throw new InvalidArgumentError(`${field} must be an ISO 8601 date or date-time that exists, got ${quote(value)}`);
  return new Date(Math.min(Math.max(instant, EARLIEST), LATEST));
}

/** Validates the agents a caller may see; an empty list is valid and matches nothing. */
export function parseAgentIds(values: readonly string[] | null | undefined, field: string): string[] {
  const ids = values ?? [];
  if (ids.length > MAX_AGENT_IDS) throw new InvalidArgumentError(`${field} may list at most ${MAX_AGENT_IDS} agents`);
  for (const id of ids) {
    if (typeof id !== 'string' || id.length === 0 || id.length > MAX_ID_LENGTH) {
      throw new InvalidArgumentError(`${field} must hold non-empty ids of at most ${MAX_ID_LENGTH} characters`);
    }
  }
  return [...ids];
}

function optionalText(value: string | null | undefined, field: string): string | undefined {
  if (value === null || value === undefined || value === '') return undefined;
  if (value.length > MAX_TEXT_LENGTH) throw new InvalidArgumentError(`${field} must be at most ${MAX_TEXT_LENGTH} characters`);
  return value;
}

/**
 * Turns the wire filter into a validated `AuditFilter`; empty strings mean "not set". Errors
 * name a filter by the query parameter of GET /api/audit it carries (`from`, not
 * `filter.from`): the gateway passes these messages on to its caller.
 */
export function parseFilter(message: AuditFilterMsg | null | undefined): AuditFilter {
  const msg: Partial<AuditFilterMsg> = message ?? {};
  const from = parseInstant(msg.from ?? '', 'from', 'from');
  const to = parseInstant(msg.to ?? '', 'to', 'to');
  if (from && to && from > to) throw new InvalidArgumentError(`from (${msg.from}) is after to (${msg.to})`);
  const result = optionalText(msg.result, 'result');
  if (result !== undefined && result !== 'ALLOW' && result !== 'DENY') {
    throw new InvalidArgumentError(`result must be ALLOW or DENY, got ${quote(result)}`);
  }
  const filter: AuditFilter = { agentIds: parseAgentIds(msg.agentIds, 'filter.agent_ids') };
  if (from) filter.from = from;
  if (to) filter.to = to;
  if (result) filter.result = result;
  const agent = optionalText(msg.agent, 'agent');
  if (agent !== undefined) {
    filter.agent = agent;
    filter.agentIdsByCurrentName = parseAgentIds(msg.agentIdsByCurrentName, 'filter.agent_ids_by_current_name');
  }
  const service = optionalText(msg.service, 'service');
  if (service !== undefined) filter.service = service;
  const tool = optionalText(msg.tool, 'tool');
  if (tool !== undefined) filter.tool = tool;
  const member = optionalText(msg.member, 'member');
  if (member !== undefined) filter.member = member;
  const policy = optionalText(msg.policy, 'policy');
  if (policy !== undefined) filter.policy = policy;
  return filter;
}

/**
 * The filter and the agents whose policy identities the caller may not see (decision 022).
 * A `policy` filter never matches those agents' entries: it compares what the caller sees,
 * and they see no policy there — else the filter would tell which entries a hidden policy
 * matched.
 */
function withRedaction(message: AuditFilterMsg | null | undefined, redactIds: readonly string[] | null | undefined): { filter: AuditFilter; redactPolicyAgentIds: ReadonlySet<string> } {
  const filter = parseFilter(message);
  const redactPolicyAgentIds = new Set(parseAgentIds(redactIds, 'redact_policy_agent_ids'));
  if (filter.policy !== undefined && redactPolicyAgentIds.size > 0) filter.agentIds = filter.agentIds.filter((id) => !redactPolicyAgentIds.has(id));
  return { filter, redactPolicyAgentIds };
}

function nonNegative(value: number | null | undefined, field: string): number {
  const n = value ?? 0;
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError(`${field} must be a non-negative integer, got ${n}`);
  return n;
}

/** `Query`: limit 0 means the default (500); larger limits are clamped to 500. */
export function parseQueryRequest(request: QueryRequest): { filter: AuditFilter; page: AuditPage; redactPolicyAgentIds: ReadonlySet<string> } {
  const limit = nonNegative(request.limit, 'limit');
  return {
    ...withRedaction(request.filter, request.redactPolicyAgentIds),
    page: { limit: limit === 0 ? QUERY_LIMIT_MAX : Math.min(limit, QUERY_LIMIT_MAX), offset: nonNegative(request.offset, 'offset') },
  };
}

export type ExportFormat = 'csv' | 'ndjson';

export interface ParsedExportRequest {
  filter: AuditFilter;
  /** `limit` 0 = every matching row. */
  page: AuditPage;
  format: ExportFormat;
  redactPolicyAgentIds: ReadonlySet<string>;
}

/** `Export`: format defaults to CSV; limit 0 means every matching row. */
export function parseExportRequest(request: ExportRequest): ParsedExportRequest {
  const format = request.format || 'csv';
  if (format !== 'csv' && format !== 'ndjson') throw new InvalidArgumentError(`format must be csv or ndjson, got ${quote(format)}`);
  return {
    ...withRedaction(request.filter, request.redactPolicyAgentIds),
    page: { limit: nonNegative(request.limit, 'limit'), offset: nonNegative(request.offset, 'offset') },
    format,
  };
}

/** `Stats`: the agents and an optional inclusive time range. */
export function parseStatsRequest(request: StatsRequest): AuditStatsFilter {
  const from = parseInstant(request.from ?? '', 'from', 'from');
  const to = parseInstant(request.to ?? '', 'to', 'to');
  if (from && to && from > to) throw new InvalidArgumentError(`from (${request.from}) is after to (${request.to})`);
  return { agentIds: parseAgentIds(request.agentIds, 'agent_ids'), from, to };
}

/** `Histogram`: exactly `Query`'s filter and redaction (a `policy` filter leaves out the agents whose policies the caller may not see). */
export function parseHistogramRequest(request: HistogramRequest): AuditFilter {
  return withRedaction(request.filter, request.redactPolicyAgentIds).filter;
}

/** Rows per list of `Overview` when the request names none, and at most. */
export const OVERVIEW_TOP_DEFAULT = 10;
export const OVERVIEW_TOP_MAX = 50;

/** `Overview`: `Stats`' agents and range, the agents whose policies it may not name, rows per list. */
export function parseOverviewRequest(request: OverviewRequest): OverviewFilter {
  const range = parseStatsRequest(request);
  const top = nonNegative(request.top, 'top');
  if (top > OVERVIEW_TOP_MAX) throw new InvalidArgumentError(`top must be at most ${OVERVIEW_TOP_MAX}, got ${top}`);
  const hidden = new Set(parseAgentIds(request.redactPolicyAgentIds, 'redact_policy_agent_ids'));
  return { ...range, policyAgentIds: range.agentIds.filter((id) => !hidden.has(id)), top: top === 0 ? OVERVIEW_TOP_DEFAULT : top };
}

/** Most policy ids one `PolicyTriggers` call may ask about (a page of the policies list is far smaller). */
export const POLICY_TRIGGERS_MAX_IDS = 1_000;

/** `PolicyTriggers`: one agent and the policy ids of a page of its policies. */
export function parsePolicyTriggersRequest(request: { agentId?: string | null; policyDbIds?: readonly string[] | null }): { agentId: string; policyDbIds: string[] } {
  const agentId = request.agentId ?? '';
  if (agentId.length === 0 || agentId.length > MAX_ID_LENGTH) throw new InvalidArgumentError(`agent_id must be a non-empty id of at most ${MAX_ID_LENGTH} characters`);
  const ids = request.policyDbIds ?? [];
  if (ids.length > POLICY_TRIGGERS_MAX_IDS) throw new InvalidArgumentError(`policy_db_ids may list at most ${POLICY_TRIGGERS_MAX_IDS} ids`);
  for (const id of ids) {
    if (typeof id !== 'string' || id.length === 0 || id.length > MAX_ID_LENGTH) {
      throw new InvalidArgumentError(`policy_db_ids must hold non-empty ids of at most ${MAX_ID_LENGTH} characters`);
    }
  }
  return { agentId, policyDbIds: [...new Set(ids)] };
}

/** Samples `ShadowResults` returns when the request names no number, and at most. */
export const SHADOW_SAMPLES_DEFAULT = 10;
export const SHADOW_SAMPLES_MAX = 50;

/** `ShadowResults`: one agent, one policy id, the instant it went into shadow, how many samples. */
export function parseShadowResultsRequest(request: { agentId?: string | null; policyDbId?: string | null; since?: string | null; sampleLimit?: number | null }): {
  agentId: string; policyDbId: string; since: Date; sampleLimit: number;
} {
  const agentId = request.agentId ?? '';
  if (agentId.length === 0 || agentId.length > MAX_ID_LENGTH) throw new InvalidArgumentError(`agent_id must be a non-empty id of at most ${MAX_ID_LENGTH} characters`);
  const policyDbId = request.policyDbId ?? '';
  if (policyDbId.length === 0 || policyDbId.length > MAX_ID_LENGTH) throw new InvalidArgumentError(`policy_db_id must be a non-empty id of at most ${MAX_ID_LENGTH} characters`);
  const since = new Date(request.since ?? '');
  if (!request.since || Number.isNaN(since.getTime())) throw new InvalidArgumentError('since must be an ISO 8601 instant');
  const limit = nonNegative(request.sampleLimit, 'sample_limit');
  if (limit > SHADOW_SAMPLES_MAX) throw new InvalidArgumentError(`sample_limit must be at most ${SHADOW_SAMPLES_MAX}, got ${limit}`);
  return { agentId, policyDbId, since, sampleLimit: limit === 0 ? SHADOW_SAMPLES_DEFAULT : limit };
}

function quote(value: string): string {
  return JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value);
}
