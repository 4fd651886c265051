import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Bus, Database } from '@portcullis/core';
import type { AuthService } from '../modules/auth/auth-service.ts';
import type { Mailer } from '../modules/mail/mailer.ts';
import { agentIdParams } from '../modules/agents/agent-access.ts';
import { createKeyService } from '../modules/members/key-service.ts';
import { createMemberService } from '../modules/members/member-service.ts';
import { requireUser } from '../plugins/session-auth.ts';
import { clientIpKey, createSharedLimiters, type AbuseRateLimits } from '../plugins/rate-limits.ts';

const uuid = z.string().uuid('must be a UUID');
const memberParams = z.strictObject({ id: uuid, memberId: uuid });
const inviteParams = z.strictObject({ id: uuid, inviteId: uuid });

const inviteBody = z.strictObject({ email: z.string().trim().max(320).email() });
/** A token is ~600 characters for the longest address; anything far longer is not one of ours. */
const joinBody = z.strictObject({ token: z.string().min(1).max(2048) });
const approveBody = z.strictObject({ status: z.literal('approved') });
const keyBody = z.strictObject({
  currentKey: z.string().regex(/^pcm_[A-Za-z0-9_-]{43}$/, 'must be a member key (pcm_…)').optional(),
}).nullish();
/** Routes that take no body still refuse one with fields, like every other route refuses unknown fields. */
const noBody = z.strictObject({}).nullish();

const memberStatus = z.enum(['pending', 'approved', 'rejected']);
export const memberListQuerySchema = z.strictObject({
  status: memberStatus.optional(),
  // Above 500 is clamped, as the agent list and the audit query clamp (decisions 003, 004).
  limit: z.coerce.number().int().min(1).max(1_000_000).default(100).transform((n) => Math.min(n, 500)),
  offset: z.coerce.number().int().min(0).max(10_000_000).default(0),
});

const identityInfo = z.record(z.string(), z.unknown());
const connectionStatus = z.enum(['active', 'needs_reauth']);

/** A member: metadata only. The response schema is also a filter: nothing else can leave. */
export const memberSchema = z.object({
  id: z.string(),
  userId: z.string(),
  email: z.string(),
  role: z.enum(['owner', 'member']),
  status: memberStatus,
  createdAt: z.string(),
  approvedAt: z.string().nullable(),
  key: z.object({ displaySuffix: z.string(), lastUsedAt: z.string().nullable() }).nullable(),
  connections: z.array(z.object({ service: z.string(), identityInfo, status: connectionStatus })),
});

/**
 * A member in the list. Owners get every record in full; a member gets their own in full and
 * only `id`, `email`, `role` and `status` of the others (decision 028): the other fields are
 * absent, not empty, so "hidden" never reads as "no key" or "no connections".
 */
const listedMemberSchema = memberSchema.partial({ userId: true, createdAt: true, approvedAt: true, key: true, connections: true });
const memberListSchema = z.object({ members: z.array(listedMemberSchema), total: z.number() });
const inviteSchema = z.object({ token: z.string(), url: z.string(), expiresAt: z.string() });
/** An open invite: metadata only, never its token (decision 038). */
const openInviteSchema = z.object({
  id: z.string(),
  email: z.string().describe('The invited address'),
  invitedBy: z.string().nullable().describe('E-mail of the user who sent it; null when that account is gone'),
  createdAt: z.string().describe('ISO 8601'),
  expiresAt: z.string().describe('ISO 8601'),
});
const openInviteListSchema = z.object({ invites: z.array(openInviteSchema).describe('Newest first') });
/** A resent invite: the new invite as listed, and its link (shown to the owner once, as POST …/invite does). */
const resentInviteSchema = openInviteSchema.extend({ token: z.string(), url: z.string() });
const joinSchema = z.object({ memberId: z.string(), status: z.literal('pending') });
const issuedKeySchema = z.object({ key: z.string(), keyId: z.string(), displaySuffix: z.string() });
const resetLostSchema = z.object({ cleared: z.array(z.string()) });
const connectionListSchema = z.object({
  connections: z.array(z.object({ service: z.string(), identityInfo, status: connectionStatus, createdAt: z.string() })),
});

export interface MembersRoutesOptions {
  db: Database;
  bus: Pick<Bus, 'publishChange'>;
  auth: AuthService;
  mailer: Mailer;
  /** The server secret; invite tokens are signed under a key derived from it. */
  secret: string;
  publicUrl: string;
  /** Invites per inviting user and per client IP, key rotations per user and per member, shared by every replica (decisions 026, 068). */
  limits: Pick<AbuseRateLimits, 'invitesPerUser' | 'invitesPerIp' | 'keyRotationsPerUser' | 'keyRotationsPerMember'>;
}

/**
 * The spec's "Members and keys" endpoints (except onboarding, which lives with agents).
 * Every route needs a dashboard session, checked `onRequest` so an anonymous caller gets 401
 * before anything else is parsed; outsiders get 404, non-owners 403 on owner routes, and
 * everyone but the member themself 403 on self-only key routes (decision 005).
 */
export async function membersRoutes(fastify: FastifyInstance, options: MembersRoutesOptions) {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const memberService = createMemberService({ ...options, logMailFailure: (message, error) => fastify.log.warn({ err: error }, message) });
  const keys = createKeyService(options);
  const onRequest = requireUser(options.auth);
  const tags = ['members'];
  // Invites mail addresses a user types in: limited per user and per IP across all agents, so
  // neither several agents nor several accounts multiply what one sender can mail.
  const shared = createSharedLimiters({ db: options.db });
  const inviteLimits = shared(
    { limit: options.limits.invitesPerUser, action: 'invite', what: 'invites sent by you', subjectOf: (request) => `user:${request.user!.id}` },
    { limit: options.limits.invitesPerIp, action: 'invite-ip', what: 'invites sent from this address', subjectOf: clientIpKey },
  );
  // Each key generation re-wraps the member's vault. Per member, the count is the caller's own
  // (member and user together), so nobody else's refused attempts spend a member's allowance.
  const keyRotationLimits = shared(
    { limit: options.limits.keyRotationsPerUser, action: 'key-rotation', what: 'key rotations by you', subjectOf: (request) => `user:${request.user!.id}` },
    {
      limit: options.limits.keyRotationsPerMember, action: 'key-rotation-member', what: 'key rotations of this member key',
      subjectOf: (request) => `member:${(request.params as { memberId: string }).memberId}:user:${request.user!.id}`,
    },
  );

  app.post('/api/agents/:id/invite', {
    schema: { tags, summary: 'Create a signed invite link, valid 7 days, and e-mail it (owner)', params: agentIdParams, body: inviteBody, response: { 201: inviteSchema } },
    onRequest,
    preHandler: inviteLimits,
  }, async (request, reply) => reply.code(201).send(await memberService.invite(request.params.id, request.user!, request.body.email)));

  app.get('/api/agents/:id/invites', {
    schema: { tags, summary: 'Open invites (not used, not expired): who was invited, by whom, until when; never the token (owner)', params: agentIdParams, querystring: z.strictObject({}), response: { 200: openInviteListSchema } },
    onRequest,
  }, async (request, reply) => {
    reply.header('cache-control', 'no-store');
    return memberService.listInvites(request.params.id, request.user!);
  });

  app.post('/api/agents/:id/invites/:inviteId/resend', {
    schema: { tags, summary: 'Mail a fresh link (valid 7 days) for an unused invite; the old link stops working. Counted by the invite limits (owner)', params: inviteParams, body: noBody, response: { 200: resentInviteSchema } },
    onRequest,
    preHandler: inviteLimits,
  }, async (request, reply) => {
    reply.header('cache-control', 'no-store');
    return memberService.resendInvite(request.params.id, request.user!, request.params.inviteId);
  });

  app.delete('/api/agents/:id/invites/:inviteId', {
    schema: { tags, summary: 'Revoke an unused invite: its link no longer joins (owner)', params: inviteParams },
    onRequest,
  }, async (request, reply) => {
    await memberService.revokeInvite(request.params.id, request.user!, request.params.inviteId);
    return reply.code(204).send();
  });

  app.post('/api/agents/:id/join', {
    schema: { tags, summary: 'Join with an invite token; the invited e-mail must be the signed-in one', params: agentIdParams, body: joinBody, response: { 200: joinSchema } },
    onRequest,
  }, async (request) => memberService.join(request.params.id, request.user!, request.body.token));

  app.get('/api/agents/:id/members', {
    schema: { tags, summary: 'List members with status (approved members and owners; members see only name, role and status of others)', params: agentIdParams, querystring: memberListQuerySchema, response: { 200: memberListSchema } },
    onRequest,
  }, async (request) => memberService.list(request.params.id, request.user!, request.query));

  app.put('/api/agents/:id/members/:memberId/status', {
    schema: { tags, summary: 'Approve a pending member (owner)', params: memberParams, body: approveBody, response: { 200: memberSchema } },
    onRequest,
  }, async (request) => memberService.approve(request.params.id, request.user!, request.params.memberId));

  app.post('/api/agents/:id/members/:memberId/reject', {
    schema: { tags, summary: 'Reject a pending member (owner)', params: memberParams, body: noBody, response: { 200: memberSchema } },
    onRequest,
  }, async (request) => memberService.reject(request.params.id, request.user!, request.params.memberId));

  app.delete('/api/agents/:id/members/:memberId', {
    schema: { tags, summary: 'Remove a member and invalidate their key (owner)', params: memberParams },
    onRequest,
  }, async (request, reply) => {
    await memberService.remove(request.params.id, request.user!, request.params.memberId);
    return reply.code(204).send();
  });

  app.put('/api/agents/:id/members/:memberId/key', {
    schema: { tags, summary: 'Generate or rotate the member key (self); the only time the key is shown. Limited per user and per member (429)', params: memberParams, body: keyBody, response: { 200: issuedKeySchema } },
    onRequest,
    preHandler: keyRotationLimits,
  }, async (request, reply) => {
    const issued = await keys.issue(request.params.id, request.user!, request.params.memberId, request.body?.currentKey);
    reply.header('cache-control', 'no-store');
    return { key: issued.key, keyId: issued.keyId, displaySuffix: issued.displaySuffix };
  });

  app.delete('/api/agents/:id/members/:memberId/key', {
    schema: { tags, summary: 'Revoke the member key (self or owner)', params: memberParams },
    onRequest,
  }, async (request, reply) => {
    await keys.revoke(request.params.id, request.user!, request.params.memberId);
    return reply.code(204).send();
  });

  app.post('/api/agents/:id/members/:memberId/key/reset-lost', {
    schema: { tags, summary: 'Clear the connections the current key cannot open, so they can be reconnected (self)', params: memberParams, body: noBody, response: { 200: resetLostSchema } },
    onRequest,
  }, async (request) => keys.resetLost(request.params.id, request.user!, request.params.memberId));

  app.get('/api/agents/:id/members/:memberId/connections', {
    schema: { tags, summary: 'The member\'s service connections; metadata only (self or owner)', params: memberParams, response: { 200: connectionListSchema } },
    onRequest,
  }, async (request) => memberService.connections(request.params.id, request.user!, request.params.memberId));
}
