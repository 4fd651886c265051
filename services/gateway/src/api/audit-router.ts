import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { APPROVAL_EVENTS, parseAuditBound, type ApprovalEvent, type AuditEntryMsg, type Decision, type AuditFilterMsg, type Database } from '@portcullis/core';
import type { AuditClient } from '../clients/audit-client.ts';
import { exportBody } from '../clients/export-body.ts';
import { auditScopeOf, type AuditScope } from '../modules/audit/audit-scope.ts';
import type { AuthService } from '../modules/auth/auth-service.ts';
import { requireUser } from '../plugins/session-auth.ts';
import type { WorkGates } from '../plugins/work-gates.ts';

/** `from` / `to`: ISO 8601 as the audit service reads it (`parseAuditBound`, inclusive at the precision written). */
export const auditBound = z.string().max(40).refine((v) => parseAuditBound(v, 'from') !== undefined, 'must be an ISO 8601 date or date-time');
const shortText = z.string().max(200);

/** The filter parameters of GET /api/audit, shared by the export. */
const filterShape = {
  from: auditBound.optional(),
  to: auditBound.optional(),
  agent: shortText.optional(),
  /** Exact agent id (decision 045): narrows the caller's scope; an agent outside it matches nothing. */
  agentId: z.guid('must be an agent id (a UUID)').optional(),
  service: shortText.optional(),
  tool: shortText.optional(),
  result: z.enum(['ALLOW', 'DENY']).optional(),
  member: shortText.optional(),
  policy: shortText.optional(),
};
export type AuditFilterQuery = z.output<z.ZodObject<typeof filterShape>>;

/**
 * A range that ends before it starts is 400 `invalid_request` on `from` — the query parameter
 * the caller sent, as on the live stream — before any service is asked (issue 15).
 */
export function withOrderedRange<T extends z.ZodObject<{ from: z.ZodOptional<typeof auditBound>; to: z.ZodOptional<typeof auditBound> }>>(schema: T): T {
  return schema.superRefine((q: { from?: string | undefined; to?: string | undefined }, ctx) => {
    if (q.from === undefined || q.to === undefined) return;
    const from = parseAuditBound(q.from, 'from'), to = parseAuditBound(q.to, 'to');
    if (from !== undefined && to !== undefined && from > to) ctx.addIssue({ code: 'custom', path: ['from'], message: 'must not be after "to"' });
  });
}

/** The query parameters of GET /api/audit, exactly as the interface specification lists them. */
export const auditQuerySchema = withOrderedRange(z.strictObject({
  ...filterShape,
  limit: z.coerce.number().int().min(1).default(500).transform((n) => Math.min(n, 500)),
  offset: z.coerce.number().int().min(0).max(10_000_000).default(0),
}));

/** The query parameters of GET /api/audit/histogram: exactly GET /api/audit's filters (no paging). */
export const auditHistogramQuerySchema = withOrderedRange(z.strictObject(filterShape));

/** One bar of a histogram: entries (`calls`) and denies from `start` for `bucketSeconds`. */
export const histogramSchema = z.object({
  bucketSeconds: z.number().int().describe('Width of every bucket: 60 s to 1 day, whole days for ranges over ~200 days'),
  buckets: z.array(z.object({
    start: z.string().describe('ISO 8601, the first instant of the bucket'),
    calls: z.number().int().describe('Audit entries in the bucket (what GET /api/audit lists)'),
    denies: z.number().int().describe('Of those, decision DENY'),
  })).describe('Every bucket of the range, oldest first, empty ones included; at most 200'),
});

/** The audit service's histogram as the REST API shows it. */
export const toApiHistogram = (h: { bucketSeconds: number; buckets?: Array<{ start: string; calls: number; denies: number }> | null }) => ({
  bucketSeconds: Number(h.bucketSeconds),
  buckets: (h.buckets ?? []).map((b) => ({ start: b.start, calls: Number(b.calls), denies: Number(b.denies) })),
});

/** Most rows one paged export returns (the spec's "up to 500 per request"). */
export const EXPORT_MAX_ROWS = 500;

/**
 * The query parameters of GET /api/audit/export: the filters of GET /api/audit, plus `max`
 * (1..500, default 500; refused, not clamped, outside that range), `offset`, `exportAll`
 * (`true`: every matching row after `offset`, `max` ignored) and `format` (`csv` | `ndjson`).
 * Decision 014.
 */
export const auditExportQuerySchema = withOrderedRange(z.strictObject({
  ...filterShape,
  max: z.coerce.number().int().min(1).max(EXPORT_MAX_ROWS).default(EXPORT_MAX_ROWS),
  offset: z.coerce.number().int().min(0).max(10_000_000).default(0),
  exportAll: z.enum(['true', 'false']).transform((v) => v === 'true').optional(),
  format: z.enum(['csv', 'ndjson']).default('csv'),
}));

/**
 * The wire filter for the scope's agents and the REST filter fields (absent = empty = not
 * set). An `agentId` narrows the scope's agents to that one (none when the caller cannot see
 * it, so it matches nothing, as `member` and `policy` do — decision 045); agent id leads the
 * store's sort key. An `agent` substring also names the agents whose current name contains it:
 * the audit store knows only the names entries were recorded with (decision 035).
 */
export function auditFilterOf(scope: Pick<AuditScope, 'agentIds' | 'agentNames'>, q: AuditFilterQuery): AuditFilterMsg {
  const agentIds = q.agentId === undefined ? scope.agentIds : scope.agentIds.filter((id) => id === q.agentId);
  const needle = q.agent?.toLowerCase();
  const agentIdsByCurrentName = needle ? agentIds.filter((id) => scope.agentNames.get(id)?.toLowerCase().includes(needle)) : [];
  return {
    agentIds, from: q.from ?? '', to: q.to ?? '', agent: q.agent ?? '', service: q.service ?? '', tool: q.tool ?? '',
    result: q.result ?? '', member: q.member ?? '', policy: q.policy ?? '', agentIdsByCurrentName,
  };
}

/** `portcullis-audit-20261124-071348.csv`: UTC, no characters that need quoting. */
function exportFileName(format: 'csv' | 'ndjson', now: Date): string {
  const stamp = now.toISOString().slice(0, 19).replaceAll('-', '').replace('T', '-').replaceAll(':', '');
  return `portcullis-audit-${stamp}.${format}`;
}

const EXPORT_CONTENT_TYPES = { csv: 'text/csv; charset=utf-8', ndjson: 'application/x-ndjson' } as const;

/**
 * An audit entry as the REST API shows it: every field of the specification's table, plus
 * `user` (the list example's name for `memberName`), `policyVersionIds` (the versions in
 * force, spec §7) and `policyDbIds` (what the `policy` filter takes, decision 071). The serializer keeps only what this schema names, so it names them all.
 */
export const auditEntrySchema = z.object({
  id: z.string().describe('Unique entry id'),
  timestamp: z.string().describe('ISO 8601, when the decision was made'),
  agentId: z.string(),
  agentName: z.string(),
  memberId: z.string().describe('The member (membership) id: the `member` filter'),
  memberName: z.string().describe('The member\'s e-mail or display name'),
  user: z.string().describe('Same as memberName'),
  memberKeyId: z.string().describe('Key record id, never the key'),
  sessionId: z.string().optional().describe('MCP session id, where the call had one'),
  oauthClientId: z.string().optional().describe('The OAuth client the call came through (GET /api/agents/{id}/oauth-grants names it); absent for a member key'),
  service: z.string().describe('Connector key'),
  tool: z.string(),
  action: z.string().describe('Cedar action URI'),
  resource: z.string().describe('Cedar resource the action targeted'),
  callerIp: z.string(),
  toolArgs: z.record(z.string(), z.unknown()).describe('Arguments passed to the tool; may be redacted'),
  decision: z.enum(['ALLOW', 'DENY']),
  reason: z.string(),
  matchedPolicyIds: z.array(z.string()).describe('Keys of the policies that matched (empty where the caller may not see them)'),
  matchedPolicyNames: z.array(z.string()),
  policyVersionIds: z.array(z.string()).describe('The version in force of each matched policy'),
  policyDbIds: z.array(z.string())
    .describe('Database id of each matched policy: the `policy` filter (empty where the caller may not see policy identities, decision 022)'),
  durationMs: z.number().describe('Total proxy time, upstream included'),
  principal: z.string().describe('Cedar principal used in evaluation'),
  shadowDecision: z.enum(['ALLOW', 'DENY', 'APPROVAL_REQUIRED']).optional()
    .describe('What the verdict would have been with the agent\'s shadow policies enforced too; absent when the agent had none (decision 061). Never the verdict'),
  shadowPolicyIds: z.array(z.string()).optional()
    .describe('Keys of the shadow policies that decided shadowDecision (empty where the caller may not see policy identities)'),
  approvalId: z.string().optional().describe('The call approval this entry is an event of (decision 063); absent for other entries'),
  approvalEvent: z.enum(APPROVAL_EVENTS).optional()
    .describe('proposed (the held call) | approved | denied | expired | executed (the approved call, forwarded) | returned (its outcome)'),
  approverId: z.string().optional().describe('The owner who approved or denied (approved / denied events)'),
  approverName: z.string().optional().describe('Their e-mail'),
});

/** GET /api/audit: one page, newest first, and how many entries match in all. */
export const auditPageSchema = z.object({ entries: z.array(auditEntrySchema), total: z.number().int() });

/** GET /api/audit/members. */
export const auditMembersSchema = z.object({
  members: z.array(z.object({ memberId: z.string().describe('The `member` filter'), memberName: z.string() })),
});

/** An audit entry as the REST API shows it (`auditEntrySchema`). */
export function toApiEntry(e: AuditEntryMsg): z.output<typeof auditEntrySchema> {
  return {
    id: e.id,
    timestamp: e.timestamp,
    agentId: e.agentId,
    agentName: e.agentName,
    memberId: e.memberId,
    memberName: e.memberName,
    user: e.memberName,
    memberKeyId: e.memberKeyId,
    ...(e.sessionId ? { sessionId: e.sessionId } : {}),
    ...(e.oauthClientId ? { oauthClientId: e.oauthClientId } : {}),
    service: e.service,
    tool: e.tool,
    action: e.action,
    resource: e.resource,
    callerIp: e.callerIp,
    toolArgs: safeJson(e.toolArgsJson),
    decision: e.decision as Decision,
    reason: e.reason,
    matchedPolicyIds: e.matchedPolicyIds,
    matchedPolicyNames: e.matchedPolicyNames,
    policyVersionIds: e.policyVersionIds,
    policyDbIds: e.matchedPolicyDbIds,
    durationMs: e.durationMs,
    principal: e.principal,
    ...(e.shadowDecision === 'ALLOW' || e.shadowDecision === 'DENY' || e.shadowDecision === 'APPROVAL_REQUIRED'
      ? { shadowDecision: e.shadowDecision, shadowPolicyIds: e.shadowPolicyIds ?? [] }
      : {}),
    ...(e.approvalId && (APPROVAL_EVENTS as readonly string[]).includes(e.approvalEvent ?? '')
      ? { approvalId: e.approvalId, approvalEvent: e.approvalEvent as ApprovalEvent }
      : {}),
    ...(e.approverId ? { approverId: e.approverId, approverName: e.approverName ?? '' } : {}),
  };
}

function safeJson(text: string): Record<string, unknown> {
  try { return JSON.parse(text || '{}') as Record<string, unknown>; } catch { return {}; }
}

/**
 * GET /api/audit, its export and its member list, over the caller's `AuditScope` (agents owned
 * or approved member of, and deleted agents they owned; policy identities hidden where the
 * scope says so — decisions 014, 022, 023).
 */
export async function auditRoutes(fastify: FastifyInstance, options: { db: Database; auth: AuthService; audit: AuditClient; gates: Pick<WorkGates, 'reads' | 'exports'> }) {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  // Turns per user and agent (decision 069): the filter's agent, when it names one.
  const ownerOf = (request: FastifyRequest) => ({ userId: request.user!.id, agentId: (request.query as { agentId?: string }).agentId });
  const read = options.gates.reads.hook(ownerOf);
  app.get('/api/audit', { schema: { tags: ['audit'], querystring: auditQuerySchema, response: { 200: auditPageSchema } }, onRequest: requireUser(options.auth), preHandler: read }, async (request) => {
    const q = request.query;
    const scope = await auditScopeOf(options.db, request.user!.id);
    const { entries, total } = await options.audit.query({
      filter: auditFilterOf(scope, q), limit: q.limit, offset: q.offset, redactPolicyAgentIds: scope.redactPolicyAgentIds,
    });
    return { entries: entries.map(toApiEntry), total: Number(total) };
  });

  /**
   * The export streams the audit service's chunks straight through (constant memory, with
   * backpressure); errors before the first chunk are ordinary REST errors, and a client that
   * goes away cancels the gRPC call and with it the store query (see `exportBody`).
   */
  app.get('/api/audit/export', {
    schema: { tags: ['audit'], querystring: auditExportQuerySchema, description: 'CSV (default) or NDJSON export of the visible audit entries matching the filters.' },
    onRequest: requireUser(options.auth),
    preHandler: options.gates.exports.hook(ownerOf),
  }, async (request, reply) => {
    const q = request.query;
    const scope = await auditScopeOf(options.db, request.user!.id);
    const call = options.audit.export({
      filter: auditFilterOf(scope, q),
      limit: q.exportAll ? 0 : q.max,
      offset: q.offset,
      format: q.format,
      redactPolicyAgentIds: scope.redactPolicyAgentIds,
    });
    reply.raw.once('close', () => { if (!reply.raw.writableFinished) call.cancel(); });
    const body = await exportBody(call);
    return reply
      .header('content-type', EXPORT_CONTENT_TYPES[q.format])
      .header('content-disposition', `attachment; filename="${exportFileName(q.format, new Date())}"`)
      .header('cache-control', 'no-store')
      .header('x-content-type-options', 'nosniff')
      .send(body);
  });

  /**
   * The audit explorer's histogram: the entries GET /api/audit lists for the same filters
   * (same parsing, same scope and redaction), counted per time bucket, so the buckets add up
   * to its `total` (decision 037).
   */
  app.get('/api/audit/histogram', {
    schema: {
      tags: ['audit'], querystring: auditHistogramQuerySchema, response: { 200: histogramSchema },
      description: 'Entries and denies per time bucket for GET /api/audit\'s filters; the buckets add up to its total. Without from/to the range is the matches\' own (to: now at the latest).',
    },
    onRequest: requireUser(options.auth),
    preHandler: read,
  }, async (request) => {
    const scope = await auditScopeOf(options.db, request.user!.id);
    return toApiHistogram(await options.audit.histogram({ filter: auditFilterOf(scope, request.query), redactPolicyAgentIds: scope.redactPolicyAgentIds }));
  });

  app.get('/api/audit/members', {
    schema: { tags: ['audit'], querystring: z.strictObject({}), response: { 200: auditMembersSchema }, description: 'Member identities appearing in the caller\'s audit data, for filter dropdowns.' },
    onRequest: requireUser(options.auth),
    preHandler: read,
  }, async (request) => {
    const { agentIds } = await auditScopeOf(options.db, request.user!.id);
    const { members } = await options.audit.members({ agentIds });
    return { members: members.map((m) => ({ memberId: m.memberId, memberName: m.memberName })) };
  });
}
