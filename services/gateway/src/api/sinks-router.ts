import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Bus, Database, OutboundRule } from '@portcullis/core';
import type { AuthService } from '../modules/auth/auth-service.ts';
import { agentIdParams, loadAgentAccess, requireOwner } from '../modules/agents/agent-access.ts';
import { createSinkService, MAX_SINKS_PER_AGENT } from '../modules/sinks/sink-service.ts';
import { createSharedLimiters, type AbuseRateLimits } from '../plugins/rate-limits.ts';
import { requireUser } from '../plugins/session-auth.ts';

const NO_CONTROL_CHARS = /^[^\u0000-\u001f\u007f]*$/;
/** Headers the request itself sets: an owner's OTLP header may not replace them. */
const RESERVED_HEADERS = new Set(['content-type', 'content-length', 'host', 'transfer-encoding', 'connection', 'user-agent']);

const name = z.string().trim().min(1, 'must not be empty').max(100).regex(NO_CONTROL_CHARS, 'must not contain control characters');
const url = z.string().trim().min(1, 'must not be empty').max(2048)
  .describe('https URL of a public address (plain http only to loopback outside production; internal hosts only when the operator lists them in SINK_ALLOWED_HOSTS)');
const secret = z.string().min(16, 'must be at least 16 characters').max(512)
  .describe('HMAC-SHA256 key the requests are signed with (Portcullis-Signature header); stored sealed, never returned');
const headers = z.record(
  z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$/, 'must be an HTTP header name'),
  z.string().min(1, 'must not be empty').max(4096).regex(NO_CONTROL_CHARS, 'must not contain control characters'),
).refine((h) => Object.keys(h).length <= 10, 'at most 10 headers')
  .refine((h) => !Object.keys(h).some((k) => RESERVED_HEADERS.has(k.toLowerCase())), `${[...RESERVED_HEADERS].join(', ')} are set by Portcullis`)
  .describe('Request headers for the collector, e.g. an API key; stored sealed, only their names are returned');

const createBody = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('webhook'), name, url, secret }),
  z.strictObject({ kind: z.literal('otlp'), name, url: url.describe('OTLP/HTTP endpoint; /v1/logs is appended unless the path ends with it'), headers: headers.optional() }),
]);
const updateBody = z.strictObject({
  name: name.optional(), url: url.optional(), enabled: z.boolean().optional(),
  secret: secret.optional().describe('Webhook sinks: a new signing secret'),
  headers: headers.optional().describe('OTLP sinks: replaces every header ({} removes them)'),
}).refine((b) => Object.values(b).some((v) => v !== undefined), { message: 'give at least one field to change', path: ['name'] });

/** Send test takes nothing: no body, or `{}`. */
const noBody = z.strictObject({}).nullish();

const sinkParams = z.strictObject({ id: z.string().uuid('must be a UUID'), sinkId: z.string().uuid('must be a UUID') });

const sinkSchema = z.object({
  id: z.string(),
  agentId: z.string(),
  kind: z.enum(['webhook', 'otlp']),
  name: z.string(),
  url: z.string(),
  enabled: z.boolean(),
  headerNames: z.array(z.string()).describe('OTLP sinks: the names of the sealed headers'),
  lag: z.number().int().nullable().describe('Entries accepted for the sink and not yet delivered; null when the bus cannot say'),
  lastError: z.string().nullable().describe('The last failed delivery: the HTTP status or the class of failure (the answer\'s text only for hosts on SINK_ALLOWED_HOSTS)'),
  lastErrorAt: z.string().nullable(),
  lastDeliveredAt: z.string().nullable(),
  createdAt: z.string(),
  updatedAt: z.string(),
});
const testResult = z.object({ delivered: z.boolean(), error: z.string().nullable() });

/**
 * `/api/agents/:id/sinks`: the agent owner's audit sinks (issue 20, decision 055) — HTTPS
 * webhooks and OTLP/HTTP log endpoints that receive every audit entry of the agent. Owner only
 * (approved and pending members 403, outsiders 404); secrets are write-only.
 */
export async function sinksRoutes(fastify: FastifyInstance, options: {
  db: Database; bus: Pick<Bus, 'sinkFeed' | 'publishChange'>; auth: AuthService; secret: string;
  /** Send test per user and per agent, shared by every replica. */
  limits: Pick<AbuseRateLimits, 'sinkTestsPerUser' | 'sinkTestsPerAgent'>;
  /** Where a sink may point (decision 058). */
  destinations: OutboundRule;
}) {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const sinks = createSinkService(options);
  // Each Send test makes the server connect where an owner said: limited, so it cannot be a scanner.
  const testLimits = createSharedLimiters({ db: options.db })(
    { limit: options.limits.sinkTestsPerUser, action: 'sink-test', what: 'sink tests sent by you', subjectOf: (request) => `user:${request.user!.id}` },
    { limit: options.limits.sinkTestsPerAgent, action: 'sink-test-agent', what: 'sink tests for this agent', subjectOf: (request) => `agent:${(request.params as { id: string }).id}` },
  );
  const ownerOf = async (agentId: string, userId: string) => {
    const access = await loadAgentAccess(options.db, agentId, userId);
    requireOwner(access);
    return access;
  };

  app.get('/api/agents/:id/sinks', {
    schema: { tags: ['sinks'], summary: 'The agent\'s audit sinks, with lag and last error', params: agentIdParams, response: { 200: z.object({ sinks: z.array(sinkSchema) }) } },
    onRequest: requireUser(options.auth),
  }, async (request) => {
    await ownerOf(request.params.id, request.user!.id);
    return { sinks: await sinks.list(request.params.id) };
  });

  app.post('/api/agents/:id/sinks', {
    schema: {
      tags: ['sinks'], summary: 'Adds an audit sink: it receives the agent\'s entries from now on',
      description: `At most ${MAX_SINKS_PER_AGENT} sinks an agent (409 beyond).`,
      params: agentIdParams, body: createBody, response: { 201: sinkSchema },
    },
    onRequest: requireUser(options.auth),
  }, async (request, reply) => {
    await ownerOf(request.params.id, request.user!.id);
    return reply.code(201).send(await sinks.create(request.params.id, request.user!.id, request.body));
  });

  app.put('/api/agents/:id/sinks/:sinkId', {
    schema: { tags: ['sinks'], summary: 'Changes an audit sink (name, URL, enabled, secret or headers)', params: sinkParams, body: updateBody, response: { 200: sinkSchema } },
    onRequest: requireUser(options.auth),
  }, async (request) => {
    await ownerOf(request.params.id, request.user!.id);
    return sinks.update(request.params.id, request.params.sinkId, request.body);
  });

  app.delete('/api/agents/:id/sinks/:sinkId', {
    schema: { tags: ['sinks'], summary: 'Deletes an audit sink and what it had not delivered', params: sinkParams },
    onRequest: requireUser(options.auth),
  }, async (request, reply) => {
    await ownerOf(request.params.id, request.user!.id);
    await sinks.remove(request.params.id, request.params.sinkId);
    return reply.code(204).send();
  });

  app.post('/api/agents/:id/sinks/:sinkId/test', {
    schema: {
      tags: ['sinks'], summary: 'Sends a test entry to the sink now and says whether it was taken',
      description: 'No body (or `{}`). The answer names the HTTP status or the class of failure only. '
        + 'Limited per user and per agent per hour (429 with Retry-After beyond).',
      params: sinkParams, body: noBody, response: { 200: testResult },
    },
    onRequest: requireUser(options.auth),
  }, async (request, reply) => {
    const access = await ownerOf(request.params.id, request.user!.id);
    // Counted after the owner check: nobody else can spend the owner's tests.
    await testLimits(request, reply);
    return sinks.test(request.params.id, request.params.sinkId, access.agent.name);
  });
}
