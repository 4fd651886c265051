import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { storedPolicyConditionsSchema, type Bus, type Database } from '@portcullis/core';
import type { AuditClient } from '../clients/audit-client.ts';
import type { PolicyClient } from '../clients/policy-client.ts';
import type { AuthService } from '../modules/auth/auth-service.ts';
import { createPolicyService } from '../modules/policies/policy-service.ts';
import { policyBodySchema, policyEffectSchema, policyModeSchema, policyPrincipalSchema, policyTierSchema } from '../modules/policies/policy-types.ts';
import { requireUser } from '../plugins/session-auth.ts';
import type { WorkGates } from '../plugins/work-gates.ts';

const uuid = z.string().uuid('must be a UUID');
const agentParams = z.strictObject({ id: uuid });
const policyParams = z.strictObject({ id: uuid, policyId: uuid });
const versionParams = z.strictObject({ id: uuid, policyId: uuid, versionId: uuid });
const bareToggleParams = z.strictObject({ policyId: uuid });

/** Query of GET /api/agents/:id/policies: the spec's filters, sorting and paging; bounds in decision 012. */
export const policyListQuerySchema = z.strictObject({
  search: z.string().trim().max(200).optional(),
  service: z.string().trim().max(64).optional(),
  effect: policyEffectSchema.optional(),
  enabled: z.enum(['true', 'false']).transform((v) => v === 'true').optional(),
  /** Enforced or shadow policies only (decision 061); beyond the spec's filters. */
  mode: policyModeSchema.optional(),
  sortBy: z.enum(['name', 'policyKey', 'service', 'effect', 'enabled', 'createdAt', 'updatedAt']).default('createdAt'),
  sortDir: z.enum(['asc', 'desc']).default('desc'),
  // Above 200 is clamped, as the agents list and the audit query clamp above their maximum.
  limit: z.coerce.number().int().min(1).default(50).transform((n) => Math.min(n, 200)),
  offset: z.coerce.number().int().min(0).max(10_000_000).default(0),
});

const isoDate = z.string().max(40).refine((v) => !Number.isNaN(Date.parse(v)) && /^\d{4}-\d{2}-\d{2}/.test(v), 'must be an ISO 8601 date');

/** Body of POST …/policies/simulate (DESIGN.md §3); `limit` at most 10,000 entries. */
const simulateBody = z.strictObject({
  draft: policyBodySchema,
  replacePolicyId: uuid.optional(),
  from: isoDate.optional(),
  to: isoDate.optional(),
  limit: z.number().int().min(1).max(10_000).optional(),
}).refine((b) => !b.from || !b.to || Date.parse(b.from) <= Date.parse(b.to), { message: 'must not be after to', path: ['from'] });

/** Preview takes any draft: what is wrong with it is the answer, not a 400. */
const previewBody = z.record(z.string(), z.unknown());

/** A policy as returned: every field of the spec's Policy table, plus the editor's fields. */
export const policySchema = z.object({
  id: z.string(),
  policyKey: z.string(),
  name: z.string(),
  service: z.string(),
  effect: policyEffectSchema,
  tools: z.array(z.string()).describe('Every tool the policy covers, tiers expanded'),
  listedTools: z.array(z.string()).describe('The tools the policy names one by one, as written'),
  tiers: z.array(policyTierSchema).describe('The tiers the policy names, as written'),
  principal: policyPrincipalSchema,
  conditions: storedPolicyConditionsSchema,
  denyMessage: z.string().nullable(),
  enabled: z.boolean(),
  mode: policyModeSchema.describe('`shadow`: evaluated on live traffic and audited (shadowDecision), never enforced (decision 061)'),
  shadowSince: z.string().nullable().describe('When the policy was last put in shadow (ISO 8601); null while enforced'),
  version: z.number().nullable(),
  currentVersionId: z.string().nullable(),
  triggerCount: z.number().nullable(),
  lastTriggered: z.string().nullable(),
  createdAt: z.string(),
  updatedAt: z.string(),
});

const policyListSchema = z.object({ policies: z.array(policySchema), total: z.number() });

const versionsSchema = z.object({
  versions: z.array(z.object({
    id: z.string(),
    version: z.number(),
    change: z.enum(['create', 'update', 'toggle', 'delete', 'restore', 'promote']),
    snapshot: z.record(z.string(), z.unknown()),
    cedar: z.string(),
    author: z.object({ id: z.string(), email: z.string() }).nullable(),
    createdAt: z.string(),
  })),
});

const previewSchema = z.object({ cedar: z.string(), errors: z.array(z.string()), warnings: z.array(z.string()) });

const simulateSchema = z.object({
  evaluated: z.number(),
  unchanged: z.number(),
  allowToDeny: z.number(),
  denyToAllow: z.number(),
  toApproval: z.number().describe('Calls that would become approval-required: held for an owner\'s approval (decision 063)'),
  fromApproval: z.number().describe('Calls that were approval-required and would not be any more'),
  samples: z.array(z.object({
    entryId: z.string().describe('The audit entry replayed (GET /api/audit lists it)'),
    before: z.string().describe('ALLOW | DENY | APPROVAL_REQUIRED'), after: z.string().describe('ALLOW | DENY | APPROVAL_REQUIRED'), reason: z.string(),
    timestamp: z.string().describe('The entry\'s time, ISO 8601'),
    memberId: z.string(),
    memberName: z.string().describe('The member\'s e-mail or display name, as the entry recorded it'),
    service: z.string(), tool: z.string(),
  })).describe('Up to 20 changed entries, newest first'),
  skipped: z.number().optional(),
  from: z.string().optional(),
  to: z.string().optional(),
  mode: policyModeSchema.describe('The draft\'s mode: `shadow` = the counts are what it would change once promoted'),
  enforcedChanges: z.number().describe('Calls whose enforced verdict saving the draft as it is changes: 0 for a shadow draft, unless it replaces an enforced policy (which then stops deciding)'),
});

/** Query of GET …/policies/:policyId/shadow: how many changed calls to list (default 10). */
const shadowQuerySchema = z.strictObject({
  samples: z.coerce.number().int().min(1).max(50).default(10),
});

const verdictSchema = z.enum(['ALLOW', 'DENY']);

const shadowResultsSchema = z.object({
  policyId: z.string(),
  shadowSince: z.string().describe('When the policy was put in shadow; the counts start here'),
  evaluated: z.number().describe('Calls since shadowSince evaluated with the agent\'s shadow policies'),
  matched: z.number().describe('Of those, the calls whose shadow verdict this policy decided'),
  allowToDeny: z.number().describe('Allowed calls it would have denied'),
  denyToAllow: z.number().describe('Denied calls it would have allowed'),
  lastMatched: z.string().nullable(),
  samples: z.array(z.object({
    entryId: z.string().describe('The audit entry (GET /api/audit lists it)'),
    timestamp: z.string(), memberId: z.string(), memberName: z.string(), service: z.string(), tool: z.string(),
    decision: verdictSchema.describe('The verdict enforced'),
    shadowDecision: verdictSchema.describe('The verdict with the shadow policies enforced'),
  })).describe('Changed calls, newest first'),
});

/**
 * The spec's "Policies (all agent-scoped)" endpoints, the operations guide's un-prefixed
 * toggle, and version restore. Owner-only: outsiders get 404, anonymous callers 401, pending
 * and approved members 403 (decision 012).
 */
export async function policiesRoutes(fastify: FastifyInstance, options: {
  db: Database;
  bus: Pick<Bus, 'publishChange'>;
  auth: AuthService;
  policy: Pick<PolicyClient, 'preview' | 'simulate'>;
  audit: Pick<AuditClient, 'policyTriggers' | 'shadowResults'>;
  gates: Pick<WorkGates, 'reads' | 'simulations'>;
}) {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const policies = createPolicyService(options);
  // `onRequest`: an anonymous caller gets 401 before its body or parameters are parsed.
  const onRequest = requireUser(options.auth);
  const tags = ['policies'];

  app.get('/api/agents/:id/policies', {
    schema: { tags, summary: 'List the agent\'s policies (owner)', params: agentParams, querystring: policyListQuerySchema, response: { 200: policyListSchema } },
    onRequest,
  }, async (request) => policies.list(request.params.id, request.user!, request.query));

  app.post('/api/agents/:id/policies', {
    schema: { tags, summary: 'Create a policy (owner)', params: agentParams, body: policyBodySchema, response: { 201: policySchema } },
    onRequest,
  }, async (request, reply) => reply.code(201).send(await policies.create(request.params.id, request.user!, request.body)));

  app.post('/api/agents/:id/policies/preview', {
    schema: { tags, summary: 'Compile a draft to Cedar without saving it (owner)', params: agentParams, body: previewBody, response: { 200: previewSchema } },
    onRequest,
  }, async (request) => policies.preview(request.params.id, request.user!, request.body));

  app.post('/api/agents/:id/policies/simulate', {
    schema: { tags, summary: 'Replay recent audit traffic against a draft (owner)', params: agentParams, body: simulateBody, response: { 200: simulateSchema } },
    onRequest,
    // Turns per user and agent (decision 069): a replay is the heaviest thing an owner can ask for.
    preHandler: options.gates.simulations.hook((request) => ({ userId: request.user!.id, agentId: (request.params as { id: string }).id })),
  }, async (request) => policies.simulate(request.params.id, request.user!, request.body));

  app.put('/api/agents/:id/policies/:policyId', {
    schema: { tags, summary: 'Replace a policy (owner)', params: policyParams, body: policyBodySchema, response: { 200: policySchema } },
    onRequest,
  }, async (request) => policies.update(request.params.id, request.params.policyId, request.user!, request.body));

  app.delete('/api/agents/:id/policies/:policyId', {
    schema: { tags, summary: 'Delete a policy; its history stays (owner)', params: policyParams },
    onRequest,
  }, async (request, reply) => {
    await policies.remove(request.params.id, request.params.policyId, request.user!);
    return reply.code(204).send();
  });

  app.post('/api/agents/:id/policies/:policyId/toggle', {
    schema: { tags, summary: 'Enable or disable without deleting (owner)', params: policyParams, response: { 200: policySchema } },
    onRequest,
  }, async (request) => policies.toggle(request.params.id, request.params.policyId, request.user!));

  app.post('/api/agents/:id/policies/:policyId/promote', {
    schema: { tags, summary: 'Start enforcing a shadow policy, as a new version (owner)', params: policyParams, response: { 200: policySchema } },
    onRequest,
  }, async (request) => policies.promote(request.params.id, request.params.policyId, request.user!));

  app.get('/api/agents/:id/policies/:policyId/shadow', {
    schema: {
      tags, summary: 'What a shadow policy would have changed since it was put in shadow (owner)',
      params: policyParams, querystring: shadowQuerySchema, response: { 200: shadowResultsSchema },
    },
    onRequest,
    preHandler: options.gates.reads.hook((request) => ({ userId: request.user!.id, agentId: (request.params as { id: string }).id })),
  }, async (request) => policies.shadowResults(request.params.id, request.params.policyId, request.user!, request.query.samples));

  app.post('/api/policies/:policyId/toggle', {
    schema: { tags, summary: 'Enable or disable without deleting (owner of the policy\'s agent)', params: bareToggleParams, response: { 200: policySchema } },
    onRequest,
  }, async (request) => policies.toggleById(request.params.policyId, request.user!));

  app.get('/api/agents/:id/policies/:policyId/versions', {
    schema: { tags, summary: 'Version history with snapshots, newest first (owner)', params: policyParams, response: { 200: versionsSchema } },
    onRequest,
  }, async (request) => policies.versions(request.params.id, request.params.policyId, request.user!));

  app.post('/api/agents/:id/policies/:policyId/versions/:versionId/restore', {
    schema: { tags, summary: 'Make an old version current again, as a new version (owner)', params: versionParams, response: { 200: policySchema } },
    onRequest,
  }, async (request) => policies.restore(request.params.id, request.params.policyId, request.params.versionId, request.user!));
}
