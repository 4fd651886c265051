import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { connectors, getConnector, type Database } from '@portcullis/core';
import type { AuthService } from '../modules/auth/auth-service.ts';
import { loadAgentAccess, requireOwner } from '../modules/agents/agent-access.ts';
import { createEntityStore } from '../modules/entities/entity-store.ts';
import type { EntityRefresh } from '../modules/entities/entity-refresh.ts';
import { requireUser } from '../plugins/session-auth.ts';

const NO_CONTROL_CHARS = /^[^\u0000-\u001f\u007f]*$/;
const connectorKeys = connectors.map((c) => c.key) as [string, ...string[]];

/**
 * `:service` must be a catalog connector and `:type` one of its entity types; both are 400
 * (a malformed request against a fixed, public list), decided before the agent is looked up.
 */
const serviceParam = z.enum(connectorKeys, { error: (issue) => `unknown service "${String(issue.input).slice(0, 64)}"` });
const entityParams = z.strictObject({
  id: z.string().uuid('must be a UUID'),
  service: serviceParam,
  type: z.string().min(1).max(100),
}).superRefine((params, ctx) => {
  const connector = getConnector(params.service);
  if (!connector || connector.entityTypes.includes(params.type)) return;
  ctx.addIssue({
    code: 'custom',
    path: ['type'],
    message: `unknown entity type "${params.type.slice(0, 64)}" for ${connector.key}; valid types: ${connector.entityTypes.join(', ')}`,
  });
});

const entityListQuerySchema = z.strictObject({
  /** Matches id or name, case-insensitively; empty means no filter. */
  search: z.string().trim().max(200).regex(NO_CONTROL_CHARS, 'must not contain control characters').optional(),
  // Above 200 is clamped, as the other lists clamp above their maximum (decisions 003, 004, 008).
  limit: z.coerce.number().int().min(1).max(1_000_000).default(50).transform((n) => Math.min(n, 200)),
  offset: z.coerce.number().int().min(0).max(10_000_000).default(0),
});

const entityListSchema = z.object({
  entities: z.array(z.object({
    id: z.string().describe('the identifier policies name (Cedar resource id), e.g. `acme/api`, `C0001`'),
    name: z.string(),
    attributes: z.record(z.string(), z.unknown()),
    harvestedAt: z.string(),
  })),
  total: z.number().describe('entities matching `search`, over all pages'),
});

/**
 * Harvested entities for policy pickers. Owner-only, like everything that serves policy
 * authoring (decision 008): outsiders and rejected members get the 404 of a missing agent,
 * pending and approved members 403.
 */
export async function entitiesRoutes(fastify: FastifyInstance, options: { db: Database; auth: AuthService; refresh: EntityRefresh }) {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const store = createEntityStore(options.db);

  app.get('/api/agents/:id/entities/:service/:type', {
    schema: {
      tags: ['connectors'],
      summary: 'Harvested entities of one connector and type, for policy pickers (owner); by name, then id',
      params: entityParams,
      querystring: entityListQuerySchema,
      response: { 200: entityListSchema },
    },
    onRequest: requireUser(options.auth),
  }, async (request) => {
    const { id, service, type } = request.params;
    requireOwner(await loadAgentAccess(options.db, id, request.user!.id));
    const { search, limit, offset } = request.query;
    return store.list({ agentId: id, service, type }, { ...(search ? { search } : {}), limit, offset });
  });

  /**
   * Harvests the connector's entities again with the caller's own connection. Authenticated
   * by the member key (Bearer), like `/mcp`: only it opens the member's sealed tokens.
   */
  app.post('/api/agents/:id/entities/:service/refresh', {
    schema: {
      tags: ['connectors'],
      summary: 'Harvest a connector\'s entities again with the caller\'s connection (member key as Bearer)',
      params: z.strictObject({ id: z.string().uuid('must be a UUID'), service: serviceParam }),
      response: { 200: z.object({ service: z.string(), harvested: z.record(z.string(), z.number()), failed: z.record(z.string(), z.string()), partial: z.record(z.string(), z.string()) }) },
    },
  }, async (request) => {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '');
    return options.refresh.refresh(match?.[1], request.params.id, request.params.service);
  });
}
