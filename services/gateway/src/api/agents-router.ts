import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Bus, Database } from '@portcullis/core';
import type { AuthService } from '../modules/auth/auth-service.ts';
import { agentIdParams } from '../modules/agents/agent-access.ts';
import { createAgentService } from '../modules/agents/agent-service.ts';
import { requireUser } from '../plugins/session-auth.ts';
import { createSharedLimiters, type AbuseRateLimits } from '../plugins/rate-limits.ts';

/** Control characters (NUL above all: Postgres text and jsonb cannot hold it) are refused, not stored. */
const NO_CONTROL_CHARS = /^[^\u0000-\u001f\u007f]*$/;
const text = (max: number) => z.string().trim().max(max).regex(NO_CONTROL_CHARS, 'must not contain control characters');

const agentName = text(200).min(1, 'must not be empty');
const tags = z.array(text(50).min(1, 'must not be empty')).max(20);
const agentType = z.enum(['standard', 'trusted']);
const agentStatus = z.enum(['active', 'disabled']);
const defaultDecision = z.enum(['allow', 'deny']);

/** Query of GET /api/agents: the spec's parameters; bounds decided in docs/decisions/004. */
export const agentListQuerySchema = z.strictObject({
  search: text(200).optional(),
  status: agentStatus.optional(),
  role: z.enum(['owner', 'member']).optional(),
  sortBy: z.enum(['name', 'createdAt', 'status']).default('createdAt'),
  sortDir: z.enum(['asc', 'desc']).default('desc'),
  // Above 100 is clamped, as the audit query clamps above its maximum (decision 003).
  limit: z.coerce.number().int().min(1).default(50).transform((n) => Math.min(n, 100)),
  offset: z.coerce.number().int().min(0).max(10_000_000).default(0),
});

const createAgentBody = z.strictObject({ name: agentName, tags: tags.optional(), type: agentType.optional() });
const updateAgentBody = z.strictObject({ name: agentName.optional(), tags: tags.optional(), defaultDecision: defaultDecision.optional() })
  .refine((b) => b.name !== undefined || b.tags !== undefined || b.defaultDecision !== undefined, { message: 'give name, tags, defaultDecision or several', path: ['name'] });
const statusBody = z.strictObject({ status: agentStatus });
const servicesBody = z.strictObject({ services: z.array(z.string().max(64)).max(64) });

const identityInfo = z.record(z.string(), z.unknown());
const memberRole = z.enum(['owner', 'member']);
const memberStatus = z.enum(['pending', 'approved', 'rejected']);

/** An agent in a list and as a detail: exactly the fields of the spec's Agent table. */
export const agentSchema = z.object({
  id: z.string(),
  name: z.string(),
  tags: z.array(z.string()),
  type: agentType,
  status: agentStatus,
  allowedServices: z.array(z.string()),
  defaultDecision,
  key: z.object({ displaySuffix: z.string().nullable(), lastUsedAt: z.string().nullable() }),
  membership: z.object({ id: z.string(), role: memberRole, status: memberStatus, memberCount: z.number() }),
  connections: z.array(z.object({ service: z.string(), identityInfo })),
  policyCount: z.number().describe('Policies of the agent (enabled or not) for its owners; 0 for members, who cannot read policies (decisions 012, 071)'),
  createdAt: z.string(),
});

const agentListSchema = z.object({ agents: z.array(agentSchema), total: z.number() });

const onboardingSchema = z.object({
  agentId: z.string(),
  member: z.object({ id: z.string(), status: memberStatus, role: memberRole }),
  key: z.object({ state: z.enum(['none', 'active']), displaySuffix: z.string().optional(), lastUsedAt: z.string().optional() }),
  connectors: z.array(z.object({
    service: z.string(),
    label: z.string(),
    oauth: z.enum(['own_app', 'managed']),
    connected: z.boolean(),
    status: z.enum(['active', 'needs_reauth']).optional(),
    identityInfo: identityInfo.optional(),
  })),
  nextStep: z.string().describe('await_approval | generate_key | connect:<service> | ready'),
});

/**
 * The spec's "Agents" endpoints plus member onboarding. Every route needs a dashboard session;
 * agent-scoped routes answer 404 to outsiders and 403 to non-owners on owner routes.
 */
export async function agentsRoutes(fastify: FastifyInstance, options: {
  db: Database; bus: Pick<Bus, 'publishChange'>; auth: AuthService;
  /** Agents created per user, shared by every replica (decision 026). */
  limits: Pick<AbuseRateLimits, 'agentsPerUser'>;
}) {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const agents = createAgentService({ db: options.db, bus: options.bus });
  // As `onRequest`, not `preHandler`: an anonymous caller gets 401 before its body or
  // parameters are even parsed, so validation never tells a stranger anything.
  const onRequest = requireUser(options.auth);
  // Agent names reach other people's inboxes in invites: creating them in bulk is limited too.
  const agentsPerUser = createSharedLimiters({ db: options.db })(
    { limit: options.limits.agentsPerUser, action: 'agent-create', what: 'agents created by you', subjectOf: (request) => `user:${request.user!.id}` },
  );

  app.get('/api/agents', {
    schema: { tags: ['agents'], summary: 'List agents (owned and member-of)', querystring: agentListQuerySchema, response: { 200: agentListSchema } },
    onRequest,
  }, async (request) => agents.list(request.user!, request.query));

  app.post('/api/agents', {
    schema: { tags: ['agents'], summary: 'Create an agent; the caller becomes its owner', body: createAgentBody, response: { 201: agentSchema } },
    onRequest,
    preHandler: agentsPerUser,
  }, async (request, reply) => reply.code(201).send(await agents.create(request.user!, request.body)));

  app.get('/api/agents/:id', {
    schema: { tags: ['agents'], summary: 'Agent detail', params: agentIdParams, response: { 200: agentSchema } },
    onRequest,
  }, async (request) => agents.get(request.params.id, request.user!));

  app.put('/api/agents/:id', {
    schema: { tags: ['agents'], summary: 'Update name, tags and default decision (owner)', params: agentIdParams, body: updateAgentBody, response: { 200: agentSchema } },
    onRequest,
  }, async (request) => agents.update(request.params.id, request.user!, request.body));

  app.delete('/api/agents/:id', {
    schema: { tags: ['agents'], summary: 'Delete the agent (owner)', params: agentIdParams },
    onRequest,
  }, async (request, reply) => {
    await agents.remove(request.params.id, request.user!);
    return reply.code(204).send();
  });

  app.put('/api/agents/:id/status', {
    schema: { tags: ['agents'], summary: 'Set active or disabled (owner)', params: agentIdParams, body: statusBody, response: { 200: agentSchema } },
    onRequest,
  }, async (request) => agents.setStatus(request.params.id, request.user!, request.body.status));

  app.put('/api/agents/:id/services', {
    schema: { tags: ['agents'], summary: 'Set the enabled connectors (owner)', params: agentIdParams, body: servicesBody, response: { 200: agentSchema } },
    onRequest,
  }, async (request) => agents.setServices(request.params.id, request.user!, request.body.services));

  app.get('/api/agents/:id/onboarding', {
    schema: { tags: ['agents'], summary: 'The caller\'s onboarding status: key, connections, next step', params: agentIdParams, response: { 200: onboardingSchema } },
    onRequest,
  }, async (request) => agents.onboarding(request.params.id, request.user!));
}
