import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { ApiError, type Database } from '@portcullis/core';
import { loadAgentAccess, requireOwner } from '../modules/agents/agent-access.ts';
import type { AuthService } from '../modules/auth/auth-service.ts';
import type { SessionEnds } from '../modules/auth/session-ends.ts';
import type { CallApprovalService } from '../modules/call-approvals/call-approval-service.ts';
import { CALL_APPROVAL_STATUSES, callApprovalOwnerSchema, callApprovalRevealAnswerSchema } from '../modules/call-approvals/call-approval-types.ts';
import { requireUser } from '../plugins/session-auth.ts';
import { SseResponse } from './audit-stream-router.ts';

const uuid = z.string().uuid('must be a UUID');
const agentParams = z.strictObject({ id: uuid });
const approvalParams = z.strictObject({ id: uuid, approvalId: uuid });

const listQuery = z.strictObject({
  status: z.enum(CALL_APPROVAL_STATUSES).optional(),
  limit: z.coerce.number().int().min(1).max(200).default(50),
  offset: z.coerce.number().int().min(0).max(10_000_000).default(0),
});
const dashboardQuery = z.strictObject({ limit: z.coerce.number().int().min(1).max(200).default(50) });

const approveBody = z.strictObject({ comment: z.string().max(500, 'must be at most 500 characters').optional() });
const denyBody = z.strictObject({ reason: z.string().trim().min(1, 'must not be empty').max(500, 'must be at most 500 characters') });

const listSchema = z.object({ approvals: z.array(callApprovalOwnerSchema), total: z.number().int() });
/** Reveal takes no input: no body, or `{}`. */
const revealBody = z.strictObject({}).nullish();

/**
 * Call approvals (issue 20 part 1, decision 063): an agent's requests, one request, an owner's
 * approval or denial, their live stream, and the caller's pending requests across agents; the
 * exact arguments with secret-looking spans masked, and a recorded reveal of them (decision 067).
 * Owner only: anonymous 401, outsiders 404, members who are not owners 403 (as policy routes).
 */
export async function callApprovalsRoutes(fastify: FastifyInstance, options: {
  db: Database;
  auth: AuthService;
  approvals: CallApprovalService;
  /** Heartbeat of the live stream, and how often its viewer's access and session are re-checked. */
  tickMs: number;
  maxStreamsPerUser: number;
  queueLimit: number;
  /** Ends a stream the moment its dashboard session ends, on any replica (decision 068). */
  sessionEnds: Pick<SessionEnds, 'watch'>;
}) {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const { approvals } = options;
  const onRequest = requireUser(options.auth);
  const tags = ['call-approvals'];

  const ownerOf = async (agentId: string, userId: string) => requireOwner(await loadAgentAccess(options.db, agentId, userId));

  app.get('/api/agents/:id/call-approvals', {
    schema: { tags, summary: 'List the agent\'s call approvals, newest first (owner)', params: agentParams, querystring: listQuery, response: { 200: listSchema } },
    onRequest,
  }, async (request) => {
    await ownerOf(request.params.id, request.user!.id);
    return approvals.list(request.params.id, request.query);
  });

  // Live stream: same framing as GET /api/audit/stream (event `approval`, id = the request's id).
  const streamsPerUser = new Map<string, number>();
  const open = new Set<{ end(reason: 'session_ended' | 'shutdown'): void }>();
  app.addHook('preClose', async () => { for (const s of open) s.end('shutdown'); });

  app.get('/api/agents/:id/call-approvals/events', {
    schema: {
      tags,
      summary: 'Live call approvals of the agent (server-sent events, owner)',
      description: 'A `text/event-stream`: `event: approval` / `id: <approval id>` / `data: <CallApproval>` whenever one is proposed or changes status (on any replica); `: keep-alive` comments; `event: end` with `{reason, message}` before the server closes it. No replay: read GET …/call-approvals first.',
      params: agentParams,
    },
    onRequest,
  }, async (request, reply) => {
    const user = request.user!;
    const agentId = request.params.id;
    await ownerOf(agentId, user.id);
    const streams = streamsPerUser.get(user.id) ?? 0;
    if (streams >= options.maxStreamsPerUser) throw new ApiError('rate_limited', `At most ${options.maxStreamsPerUser} live streams per user on one server; close another first.`);
    streamsPerUser.set(user.id, streams + 1);
    const sse = new SseResponse(reply.raw, options.queueLimit);
    const unsubscribe = approvals.subscribe(agentId, (approval) => sse.event('approval', approval.id, JSON.stringify(callApprovalOwnerSchema.parse(approval))));
    const stream = { end: (reason: 'session_ended' | 'shutdown') => sse.end(reason) };
    open.add(stream);
    const unwatch = options.sessionEnds.watch(user.sessionId, () => sse.end('session_ended'));
    // The heartbeat also re-checks the viewer: a session that ended or an owner who is one no more stops receiving.
    const ticker = setInterval(() => {
      sse.heartbeat();
      Promise.all([options.auth.listSessions(user.id), loadAgentAccess(options.db, agentId, user.id).catch(() => undefined)]).then(([sessions, access]) => {
        if (!sessions.some((s) => s.id === user.sessionId) || !access?.isOwner) sse.end('session_ended');
      }, () => undefined);
    }, options.tickMs);
    ticker.unref();
    reply.raw.on('close', () => {
      clearInterval(ticker);
      unsubscribe();
      unwatch();
      open.delete(stream);
      const left = (streamsPerUser.get(user.id) ?? 1) - 1;
      if (left > 0) streamsPerUser.set(user.id, left);
      else streamsPerUser.delete(user.id);
    });
    reply.hijack();
    sse.start();
  });

  app.get('/api/agents/:id/call-approvals/:approvalId', {
    schema: { tags, summary: 'One call approval (owner)', params: approvalParams, response: { 200: callApprovalOwnerSchema } },
    onRequest,
  }, async (request) => {
    await ownerOf(request.params.id, request.user!.id);
    return approvals.get(request.params.id, request.params.approvalId);
  });

  const approverOf = (request: { user?: { id: string; email: string }; ip: string }) => ({ userId: request.user!.id, email: request.user!.email, ip: request.ip });

  app.post('/api/agents/:id/call-approvals/:approvalId/approve', {
    schema: {
      tags, summary: 'Approve a pending call: the same call, made again before the approval expires, is forwarded once (owner)',
      description: '409 `conflict` when the request is not pending (already decided or expired); `details.status` names its status.',
      params: approvalParams, body: approveBody, response: { 200: callApprovalOwnerSchema },
    },
    onRequest,
  }, async (request) => {
    await ownerOf(request.params.id, request.user!.id);
    return approvals.approve(request.params.id, request.params.approvalId, approverOf(request), request.body.comment);
  });

  app.post('/api/agents/:id/call-approvals/:approvalId/deny', {
    schema: {
      tags, summary: 'Deny a pending call: the agent is told the reason when it calls again (owner)',
      description: '409 `conflict` when the request is not pending (already decided or expired); `details.status` names its status.',
      params: approvalParams, body: denyBody, response: { 200: callApprovalOwnerSchema },
    },
    onRequest,
  }, async (request) => {
    await ownerOf(request.params.id, request.user!.id);
    return approvals.deny(request.params.id, request.params.approvalId, approverOf(request), request.body.reason);
  });

  app.post('/api/agents/:id/call-approvals/:approvalId/reveal', {
    schema: {
      tags, summary: 'Reveal the masked spans of a held call\'s exact arguments; the reveal is recorded (owner)',
      description: 'Answers the exact arguments unmasked, and records who revealed them and when (listed in the request\'s `reveals`). 409 `conflict` once the request is executed, denied or expired: its exact arguments are destroyed then; `details.status` names its status.',
      params: approvalParams, body: revealBody, response: { 200: callApprovalRevealAnswerSchema },
    },
    onRequest,
  }, async (request, reply) => {
    await ownerOf(request.params.id, request.user!.id);
    // Secrets in the answer: never kept by a browser or proxy cache.
    void reply.header('cache-control', 'no-store');
    return approvals.reveal(request.params.id, request.params.approvalId, { userId: request.user!.id, email: request.user!.email });
  });

  app.get('/api/dashboard/call-approvals', {
    schema: {
      tags, summary: 'Pending call approvals of every agent the caller owns, the next to expire first',
      querystring: dashboardQuery, response: { 200: listSchema },
    },
    onRequest,
  }, async (request) => approvals.pendingForOwner(request.user!.id, request.query.limit));
}
