import { z } from 'zod';
import { ApiError, parseAuditBound, type AuditEntry } from '@portcullis/core';

/**
 * The filters of GET /api/audit/stream, applied in memory to each live entry. They mean
 * exactly what GET /api/audit's mean in the audit service (services/audit README, "Filter
 * semantics"); this module re-states them because services never import each other (the
 * time bounds share core's `parseAuditBound`). They are applied to the entry as the viewer
 * sees it: with policy identities redacted (decision 022), no `policy` filter matches.
 */
export interface LiveAuditFilter {
  /** Inclusive bounds, epoch milliseconds. */
  from?: number;
  to?: number;
  /** Lower-cased: a case-insensitive substring of the agent name. */
  agent?: string;
  /** Exact agent id (decision 045). */
  agentId?: string;
  /** Exact connector key. */
  service?: string;
  /** Lower-cased: a case-insensitive substring of the tool name. */
  tool?: string;
  result?: 'ALLOW' | 'DENY';
  /** Exact member id (an e-mail is compared as an id and matches nothing). */
  member?: string;
  /** Exact policy database id, one of the entry's `policyDbIds`. */
  policy?: string;
}

const instant = (bound: 'from' | 'to') => z.string().max(40).transform((value, ctx) => {
  const parsed = parseAuditBound(value, bound);
  if (parsed === undefined) {
    ctx.addIssue({ code: 'custom', message: 'must be an ISO 8601 date or date-time' });
    return z.NEVER;
  }
  return parsed;
});
/** Empty means "not set", as on GET /api/audit. */
const text = z.string().max(200).transform((v) => (v === '' ? undefined : v));

/**
 * The query parameters of GET /api/audit/stream: GET /api/audit's filters, without paging
 * (a stream has no pages, so `limit`/`offset` are unknown parameters there).
 */
export const auditStreamQuerySchema = z.strictObject({
  from: instant('from').optional(),
  to: instant('to').optional(),
  agent: text.optional(),
  agentId: z.guid('must be an agent id (a UUID)').optional(),
  service: text.optional(),
  tool: text.optional(),
  result: z.enum(['ALLOW', 'DENY']).optional(),
  member: text.optional(),
  policy: text.optional(),
});

export type AuditStreamQuery = z.output<typeof auditStreamQuerySchema>;

/**
 * The validated query as a filter (text filters lower-cased once, here). A range that ends
 * before it starts is 400 `invalid_request` on `from`, as GET /api/audit answers it.
 */
export function liveFilterOf(q: AuditStreamQuery): LiveAuditFilter {
  if (q.from !== undefined && q.to !== undefined && q.from > q.to) {
    throw new ApiError('invalid_request', 'Invalid querystring field "from": must not be after "to"', { field: 'from', in: 'querystring' });
  }
  const filter: LiveAuditFilter = {};
  if (q.from !== undefined) filter.from = q.from;
  if (q.to !== undefined) filter.to = q.to;
  if (q.agent !== undefined) filter.agent = q.agent.toLowerCase();
  if (q.agentId !== undefined) filter.agentId = q.agentId;
  if (q.service !== undefined) filter.service = q.service;
  if (q.tool !== undefined) filter.tool = q.tool.toLowerCase();
  if (q.result !== undefined) filter.result = q.result;
  if (q.member !== undefined) filter.member = q.member;
  if (q.policy !== undefined) filter.policy = q.policy;
  return filter;
}

/** True when `entry` passes every filter that is set. */
export function matchesLiveFilter(entry: AuditEntry, f: LiveAuditFilter): boolean {
  if (f.from !== undefined || f.to !== undefined) {
    const at = Date.parse(entry.timestamp);
    if (f.from !== undefined && !(at >= f.from)) return false;
    if (f.to !== undefined && !(at <= f.to)) return false;
  }
  if (f.agent !== undefined && !entry.agentName.toLowerCase().includes(f.agent)) return false;
  if (f.agentId !== undefined && entry.agentId !== f.agentId) return false;
  if (f.service !== undefined && entry.service !== f.service) return false;
  if (f.tool !== undefined && !entry.tool.toLowerCase().includes(f.tool)) return false;
  if (f.result !== undefined && entry.decision !== f.result) return false;
  if (f.member !== undefined && entry.memberId !== f.member) return false;
  if (f.policy !== undefined && !entry.policyDbIds.includes(f.policy)) return false;
  return true;
}

