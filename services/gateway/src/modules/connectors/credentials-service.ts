import { and, eq, sql } from 'drizzle-orm';
import { ApiError, getConnector, openWithSecret, schema, sealWithSecret, type Database } from '@portcullis/core';
import { loadAgentAccess, requireOwner } from '../agents/agent-access.ts';
import type { SignedIn } from '../agents/agent-service.ts';

/** Secret-box labels: a value sealed as one can never be opened as the other (or as a TOTP secret). */
export const CLIENT_SECRET_LABEL = 'connector-client-secret';
export const WEBHOOK_SECRET_LABEL = 'connector-webhook-secret';

/**
 * The four connectors whose upstream signs webhooks with a shared secret — the spec's chat
 * service, issue tracker, payments service and model hub. Only these accept `webhookSecret`
 * and `clearWebhookSecret` (decision 006). Not the catalog's `webhooks` flag: that marks
 * connectors that emit events at all, which is a wider set.
 */
export const WEBHOOK_SECRET_SERVICES: ReadonlySet<string> = new Set(['slack', 'linear', 'stripe', 'huggingface']);

export function acceptsWebhookSecret(service: string): boolean {
  return WEBHOOK_SECRET_SERVICES.has(service);
}

export interface CredentialsInput {
  clientId: string;
  clientSecret: string;
  webhookSecret?: string | undefined;
  clearWebhookSecret?: true | undefined;
}

/** The answer of a PUT: never a secret. */
export interface CredentialsSetView { service: string; configured: true; hasWebhookSecret: boolean }

/** One configured connector in the listing: metadata only, never a secret. */
export interface CredentialsView extends CredentialsSetView { clientId: string; updatedAt: string }

/** Plain secrets, for the gateway's own OAuth and webhook code; no route returns these. */
export interface OpenedCredentials { clientId: string; clientSecret: string; webhookSecret: string | null }

type Row = typeof schema.connectorCredentials.$inferSelect;

function toView(row: Row): CredentialsView {
  return { service: row.service, configured: true, clientId: row.clientId, hasWebhookSecret: row.webhookSecretSealed !== null, updatedAt: row.updatedAt.toISOString() };
}

/**
 * Owner OAuth-app credentials per agent and connector. Every operation is owner-only: outsiders
 * get 404, members 403 (see `loadAgentAccess`). Secrets are sealed with the server secret before
 * they reach the database and are never returned by the REST API.
 */
export function createCredentialsService(deps: { db: Database; secret: string }) {
  const { db, secret } = deps;
  const table = schema.connectorCredentials;

  async function ownerAccess(agentId: string, user: SignedIn): Promise<void> {
    requireOwner(await loadAgentAccess(db, agentId, user.id));
  }

  /** The input rules a schema cannot see because they depend on the path's `:service`. */
  function checkInput(service: string, input: CredentialsInput): void {
    if (!getConnector(service)) throw new ApiError('invalid_request', `Unknown service "${service}".`, { field: 'service', in: 'params' });
    if (acceptsWebhookSecret(service)) return;
    for (const field of ['webhookSecret', 'clearWebhookSecret'] as const) {
      if (input[field] !== undefined) {
        throw new ApiError('invalid_request', `The ${service} connector takes no webhook secret: remove "${field}" (only ${[...WEBHOOK_SECRET_SERVICES].join(', ')} accept one).`, { field, in: 'body' });
      }
    }
  }

  return {
    async list(agentId: string, user: SignedIn): Promise<{ credentials: CredentialsView[] }> {
      await ownerAccess(agentId, user);
      const rows = await db.select().from(table).where(eq(table.agentId, agentId)).orderBy(table.service);
      return { credentials: rows.map(toView) };
    },

    /** Upsert. Without `webhookSecret` a stored one is kept, unless `clearWebhookSecret`. */
    async put(agentId: string, user: SignedIn, service: string, input: CredentialsInput): Promise<CredentialsSetView> {
      checkInput(service, input);
      await ownerAccess(agentId, user);
      const clientSecretSealed = sealWithSecret(secret, CLIENT_SECRET_LABEL, input.clientSecret);
      const webhookSecretSealed = input.webhookSecret !== undefined
        ? sealWithSecret(secret, WEBHOOK_SECRET_LABEL, input.webhookSecret)
        : input.clearWebhookSecret ? null : undefined;
      const [row] = await db.insert(table)
        .values({ agentId, service, clientId: input.clientId, clientSecretSealed, webhookSecretSealed: webhookSecretSealed ?? null })
        .onConflictDoUpdate({
          target: [table.agentId, table.service],
          set: {
            clientId: input.clientId,
            clientSecretSealed,
            ...(webhookSecretSealed !== undefined ? { webhookSecretSealed } : {}),
            updatedAt: sql`now()`,
          },
        })
        .returning();
      return { service, configured: true, hasWebhookSecret: row!.webhookSecretSealed !== null };
    },

    /** 404 when the agent has no credentials for the service. */
    async remove(agentId: string, user: SignedIn, service: string): Promise<void> {
      if (!getConnector(service)) throw new ApiError('invalid_request', `Unknown service "${service}".`, { field: 'service', in: 'params' });
      await ownerAccess(agentId, user);
      const gone = await db.delete(table).where(and(eq(table.agentId, agentId), eq(table.service, service))).returning({ id: table.id });
      if (gone.length === 0) throw new ApiError('not_found', `No credentials are set for ${service}.`);
    },

    /** Internal: the plain credentials for the gateway's own use; undefined when none are set. */
    async open(agentId: string, service: string): Promise<OpenedCredentials | undefined> {
      const [row] = await db.select().from(table).where(and(eq(table.agentId, agentId), eq(table.service, service))).limit(1);
      if (!row) return undefined;
      return {
        clientId: row.clientId,
        clientSecret: openWithSecret(secret, CLIENT_SECRET_LABEL, row.clientSecretSealed),
        webhookSecret: row.webhookSecretSealed === null ? null : openWithSecret(secret, WEBHOOK_SECRET_LABEL, row.webhookSecretSealed),
      };
    },
  };
}

export type CredentialsService = ReturnType<typeof createCredentialsService>;
