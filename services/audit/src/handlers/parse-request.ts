import type { AuditFilterMsg, ExportRequest, QueryRequest, StatsRequest } from '@portcullis/core';
import type { AuditFilter } from '../store/audit-filter.ts';
import type { AuditPage, AuditStatsFilter } from '../store/audit-store.ts';

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

const ISO_8601 = /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?([Zz]|[+-]\d{2}(?::?\d{2})?)?)?$/;

/**
 * Parses an ISO 8601 date or date-time. A bare date means the whole day (UTC): its start as
 * `from`, its last millisecond as `to`, so both bounds stay inclusive. A date-time without an
 * offset is read as UTC. Empty means "no bound".
 */
export function parseInstant(value: string, field: string, bound: 'from' | 'to'): Date | undefined {
  if (value === '') return undefined;
  const match = ISO_8601.exec(value);
  if (!match) throw new InvalidArgumentError(`${field} must be an ISO 8601 date or date-time, got ${quote(value)}`);
  const [, y, mo, d, h, mi, s, fraction, offset] = match;
  const year = Number(y), month = Number(mo), day = Number(d);
  const hour = Number(h ?? 0), minute = Number(mi ?? 0), second = Number(s ?? 0);
  const millis = fraction ? Number(fraction.slice(0, 3).padEnd(3, '0')) : 0;
  const dateOnly = h === undefined;
  const utc = Date.UTC(year, month - 1, day, hour, minute, second, millis);
  const check = new Date(utc);
  if (check.getUTCFullYear() !== year || check.getUTCMonth() !== month - 1 || check.getUTCDate() !== day || hour > 23 || minute > 59 || second > 59) {
    throw new InvalidArgumentError(`${field} is not a valid date: ${quote(value)}`);
  }
  const offsetMinutes = parseOffset(offset, field, value);
  const instant = utc - offsetMinutes * 60_000 + (dateOnly && bound === 'to' ? 86_400_000 - 1 : 0);
  return new Date(Math.min(Math.max(instant, EARLIEST), LATEST));
}

function parseOffset(offset: string | undefined, field: string, value: string): number {
  if (!offset || offset === 'Z' || offset === 'z') return 0;
  const digits = offset.slice(1).replace(':', '');
  const hours = Number(digits.slice(0, 2)), minutes = Number(digits.slice(2) || 0);
  if (hours > 23 || minutes > 59) throw new InvalidArgumentError(`${field} has an invalid UTC offset: ${quote(value)}`);
  return (offset.startsWith('-') ? -1 : 1) * (hours * 60 + minutes);
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

/** Turns the wire filter into a validated `AuditFilter`; empty strings mean "not set". */
export function parseFilter(message: AuditFilterMsg | null | undefined): AuditFilter {
  const msg: Partial<AuditFilterMsg> = message ?? {};
  const from = parseInstant(msg.from ?? '', 'filter.from', 'from');
  const to = parseInstant(msg.to ?? '', 'filter.to', 'to');
  if (from && to && from > to) throw new InvalidArgumentError(`filter.from (${msg.from}) is after filter.to (${msg.to})`);
  const result = optionalText(msg.result, 'filter.result');
  if (result !== undefined && result !== 'ALLOW' && result !== 'DENY') {
    throw new InvalidArgumentError(`filter.result must be ALLOW or DENY, got ${quote(result)}`);
  }
  const filter: AuditFilter = { agentIds: parseAgentIds(msg.agentIds, 'filter.agent_ids') };
  if (from) filter.from = from;
  if (to) filter.to = to;
  if (result) filter.result = result;
  const agent = optionalText(msg.agent, 'filter.agent');
  if (agent !== undefined) filter.agent = agent;
  const service = optionalText(msg.service, 'filter.service');
  if (service !== undefined) filter.service = service;
  const tool = optionalText(msg.tool, 'filter.tool');
  if (tool !== undefined) filter.tool = tool;
  const member = optionalText(msg.member, 'filter.member');
  if (member !== undefined) filter.member = member;
  const policy = optionalText(msg.policy, 'filter.policy');
  if (policy !== undefined) filter.policy = policy;
  return filter;
}

function nonNegative(value: number | null | undefined, field: string): number {
  const n = value ?? 0;
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError(`${field} must be a non-negative integer, got ${n}`);
  return n;
}

/** `Query`: limit 0 means the default (500); larger limits are clamped to 500. */
export function parseQueryRequest(request: QueryRequest): { filter: AuditFilter; page: AuditPage } {
  const limit = nonNegative(request.limit, 'limit');
  return {
    filter: parseFilter(request.filter),
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
    filter: parseFilter(request.filter),
    page: { limit: nonNegative(request.limit, 'limit'), offset: nonNegative(request.offset, 'offset') },
    format,
    redactPolicyAgentIds: new Set(parseAgentIds(request.redactPolicyAgentIds, 'redact_policy_agent_ids')),
  };
}

/** `Stats`: the agents and an optional inclusive time range. */
export function parseStatsRequest(request: StatsRequest): AuditStatsFilter {
  const from = parseInstant(request.from ?? '', 'from', 'from');
  const to = parseInstant(request.to ?? '', 'to', 'to');
  if (from && to && from > to) throw new InvalidArgumentError(`from (${request.from}) is after to (${request.to})`);
  return { agentIds: parseAgentIds(request.agentIds, 'agent_ids'), from, to };
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

function quote(value: string): string {
  return JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value);
}
