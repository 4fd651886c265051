import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { connectors, getConnector, inputSchemaOf, TIERS, type Connector, type Database, type Tier } from '@portcullis/core';
import type { AuthService } from '../modules/auth/auth-service.ts';
import { agentIdParams } from '../modules/agents/agent-access.ts';
import { acceptsWebhookSecret, createCredentialsService } from '../modules/connectors/credentials-service.ts';
import { requireUser } from '../plugins/session-auth.ts';

const NO_CONTROL_CHARS = /^[^\u0000-\u001f\u007f]*$/;
const uuid = z.string().uuid('must be a UUID');

const connectorKeys = connectors.map((c) => c.key) as [string, ...string[]];
/** A connector key from the catalog; anything else is 400 naming what was given. */
const serviceKey = z.enum(connectorKeys, { error: (issue) => `unknown service "${String(issue.input).slice(0, 64)}"` });

const credentialParams = z.strictObject({ id: uuid, service: serviceKey });

/**
 * Secrets are taken verbatim (no trimming: whitespace may be part of one) and sealed, so
 * they may hold any character; the client id is stored as text and must be printable. The
 * OAuth app (`clientId` with `clientSecret`) and the webhook secret can be set apart: the four
 * webhook connectors accept `webhookSecret` or `clearWebhookSecret` alone (decision 006).
 */
const credentialsBody = z.strictObject({
  clientId: z.string().trim().min(1, 'must not be empty').max(500).regex(NO_CONTROL_CHARS, 'must not contain control characters').optional(),
  clientSecret: z.string().min(1, 'must not be empty').max(2000).optional(),
  webhookSecret: z.string().min(1, 'must not be empty').max(2000).optional(),
  clearWebhookSecret: z.literal(true).optional(),
}).refine((b) => !(b.webhookSecret !== undefined && b.clearWebhookSecret), {
  message: 'give webhookSecret or clearWebhookSecret, not both',
  path: ['clearWebhookSecret'],
}).refine((b) => b.clientSecret !== undefined || b.clientId === undefined, {
  message: 'give clientSecret with clientId', path: ['clientSecret'],
}).refine((b) => b.clientId !== undefined || b.clientSecret === undefined, {
  message: 'give clientId with clientSecret', path: ['clientId'],
}).refine((b) => b.clientId !== undefined || b.webhookSecret !== undefined || b.clearWebhookSecret !== undefined, {
  message: 'give clientId and clientSecret, webhookSecret, or clearWebhookSecret', path: ['clientId'],
});

const catalogQuery = z.strictObject({ service: serviceKey.optional() });

const oauthKind = z.enum(['own_app', 'managed']);
const tierCounts = z.object({ read: z.number(), write: z.number(), destructive: z.number() });
const metaSchema = z.object({
  connectors: z.array(z.object({
    key: z.string(),
    label: z.string(),
    oauth: oauthKind,
    webhookSecret: z.boolean().describe('whether PUT …/credentials accepts webhookSecret for this connector'),
    entityTypes: z.array(z.string()),
    toolCount: z.number(),
    tierCounts,
  })),
});

const toolSchema = z.object({
  name: z.string(),
  description: z.string(),
  inputSchema: z.object({
    type: z.literal('object'),
    properties: z.record(z.string(), z.object({ type: z.string() })),
    required: z.array(z.string()).optional(),
  }),
});
const catalogSchema = z.object({
  services: z.array(z.object({
    service: z.string(),
    label: z.string(),
    tools: z.object({ read: z.array(toolSchema), write: z.array(toolSchema), destructive: z.array(toolSchema) }),
  })),
  total: z.number(),
});

/** `configured`: the OAuth app (client id and secret) is set. */
const credentialsSetSchema = z.object({ service: z.string(), configured: z.boolean(), hasWebhookSecret: z.boolean() });
/** Metadata only. The response schema is also a filter: no sealed value can leave. */
const credentialsListSchema = z.object({
  credentials: z.array(credentialsSetSchema.extend({ clientId: z.string().nullable(), updatedAt: z.string() })),
});

function countByTier(connector: Connector): Record<Tier, number> {
  const counts = { read: 0, write: 0, destructive: 0 };
  for (const tool of connector.tools) counts[tool.tier] += 1;
  return counts;
}

function catalogEntry(connector: Connector) {
  const tools = Object.fromEntries(TIERS.map((tier) => [tier, connector.tools
    .filter((t) => t.tier === tier)
    .map((t) => ({ name: t.name, description: t.description, inputSchema: inputSchemaOf(t) }))])) as Record<Tier, Array<z.infer<typeof toolSchema>>>;
  return { service: connector.key, label: connector.label, tools };
}

/**
 * The spec's "Connectors and credentials" endpoints, except connections and entities. The
 * catalog routes need only a session; the credential routes are owner-only (decision 006).
 */
export async function connectorsRoutes(fastify: FastifyInstance, options: { db: Database; auth: AuthService; secret: string }) {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const credentials = createCredentialsService({ db: options.db, secret: options.secret });
  const onRequest = requireUser(options.auth);

  app.get('/api/connectors/meta', {
    schema: { tags: ['connectors'], summary: 'Display metadata for all connectors', response: { 200: metaSchema } },
    onRequest,
  }, async () => ({
    connectors: connectors.map((c) => ({
      key: c.key,
      label: c.label,
      oauth: c.oauth,
      webhookSecret: acceptsWebhookSecret(c.key),
      entityTypes: c.entityTypes,
      toolCount: c.tools.length,
      tierCounts: countByTier(c),
    })),
  }));

  app.get('/api/tools/catalog', {
    schema: { tags: ['connectors'], summary: 'Tool catalog grouped by tier; `service` filters to one connector', querystring: catalogQuery, response: { 200: catalogSchema } },
    onRequest,
  }, async (request) => {
    const { service } = request.query;
    const chosen = service ? [getConnector(service)!] : [...connectors];
    return { services: chosen.map(catalogEntry), total: chosen.reduce((n, c) => n + c.tools.length, 0) };
  });

  app.get('/api/agents/:id/services/credentials', {
    schema: { tags: ['connectors'], summary: 'Connectors with OAuth-app credentials or a webhook secret stored (owner); never secrets', params: agentIdParams, response: { 200: credentialsListSchema } },
    onRequest,
  }, async (request) => credentials.list(request.params.id, request.user!));

  app.put('/api/agents/:id/services/:service/credentials', {
    schema: { tags: ['connectors'], summary: 'Set the agent\'s OAuth-app credentials and/or webhook secret for a connector (owner)', params: credentialParams, body: credentialsBody, response: { 200: credentialsSetSchema } },
    onRequest,
  }, async (request) => credentials.put(request.params.id, request.user!, request.params.service, request.body));

  app.delete('/api/agents/:id/services/:service/credentials', {
    schema: { tags: ['connectors'], summary: 'Remove the credentials for a connector (owner); 404 when none', params: credentialParams },
    onRequest,
  }, async (request, reply) => {
    await credentials.remove(request.params.id, request.user!, request.params.service);
    return reply.code(204).send();
  });
}

