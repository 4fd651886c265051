import { and, eq, isNotNull, isNull, sql } from 'drizzle-orm';
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
  /** With `clientSecret`: the OAuth app. Both or neither; absent keeps the stored app. */
  clientId?: string | undefined;
  clientSecret?: string | undefined;
  webhookSecret?: string | undefined;
  clearWebhookSecret?: true | undefined;
}

/** The answer of a PUT: never a secret. `configured` says whether the OAuth app is set. */
export interface CredentialsSetView { service: string; configured: boolean; hasWebhookSecret: boolean }

/** One connector with stored credentials in the listing: metadata only, never a secret. */
export interface CredentialsView extends CredentialsSetView { clientId: string | null; updatedAt: string }

/** Plain OAuth-app secrets, for the gateway's own OAuth code; no route returns these. */
export interface OpenedCredentials { clientId: string; clientSecret: string }

type Row = typeof schema.connectorCredentials.$inferSelect;

function toView(row: Row): CredentialsView {
  return {
    service: row.service, configured: row.clientId !== null, clientId: row.clientId,
    hasWebhookSecret: row.webhookSecretSealed !== null, updatedAt: row.updatedAt.toISOString(),
  };
}

/**
 * Owner OAuth-app credentials and webhook secrets per agent and connector. Every operation is
 * owner-only: outsiders get 404, members 403 (see `loadAgentAccess`). Secrets are sealed with
 * the server secret before they reach the database and are never returned by the REST API.
 * A webhook connector may hold a webhook secret without an OAuth app (decision 006).
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
    if (input.clientId === undefined) {
      throw new ApiError('invalid_request', `The ${service} connector needs "clientId" and "clientSecret".`, { field: 'clientId', in: 'body' });
    }
  }

  return {
    async list(agentId: string, user: SignedIn): Promise<{ credentials: CredentialsView[] }> {
      await ownerAccess(agentId, user);
      const rows = await db.select().from(table).where(eq(table.agentId, agentId)).orderBy(table.service);
      return { credentials: rows.map(toView) };
    },

    /**
     * Upsert. Without `clientId`/`clientSecret` the stored OAuth app is kept; without
     * `webhookSecret` the stored webhook secret is kept, unless `clearWebhookSecret`. Clearing
     * the webhook secret of a row that holds nothing else removes the row.
     */
    async put(agentId: string, user: SignedIn, service: string, input: CredentialsInput): Promise<CredentialsSetView> {
      checkInput(service, input);
      await ownerAccess(agentId, user);
      const at = and(eq(table.agentId, agentId), eq(table.service, service));
      const app = input.clientId !== undefined && input.clientSecret !== undefined
        ? { clientId: input.clientId, clientSecretSealed: sealWithSecret(secret, CLIENT_SECRET_LABEL, input.clientSecret) }
        : undefined;
      if (!app && input.webhookSecret === undefined) {
        // Only `clearWebhookSecret`: nothing to insert, so no row is created for it.
        const [kept] = await db.update(table).set({ webhookSecretSealed: null, updatedAt: sql`now()` })
          .where(and(at, isNotNull(table.clientId))).returning();
        if (!kept) await db.delete(table).where(and(at, isNull(table.clientId)));
        return { service, configured: Boolean(kept), hasWebhookSecret: false };
      }
      const webhookSecretSealed = input.webhookSecret !== undefined
        ? sealWithSecret(secret, WEBHOOK_SECRET_LABEL, input.webhookSecret)
        : input.clearWebhookSecret ? null : undefined;
      const [row] = await db.insert(table)
        .values({ agentId, service, clientId: app?.clientId ?? null, clientSecretSealed: app?.clientSecretSealed ?? null, webhookSecretSealed: webhookSecretSealed ?? null })
        .onConflictDoUpdate({
          target: [table.agentId, table.service],
          set: {
            ...(app ?? {}),
            ...(webhookSecretSealed !== undefined ? { webhookSecretSealed } : {}),
            updatedAt: sql`now()`,
          },
        })
        .returning();
      return { service, configured: row!.clientId !== null, hasWebhookSecret: row!.webhookSecretSealed !== null };
    },

    /** 404 when the agent has no credentials for the service. */
    async remove(agentId: string, user: SignedIn, service: string): Promise<void> {
      if (!getConnector(service)) throw new ApiError('invalid_request', `Unknown service "${service}".`, { field: 'service', in: 'params' });
      await ownerAccess(agentId, user);
      const gone = await db.delete(table).where(and(eq(table.agentId, agentId), eq(table.service, service))).returning({ id: table.id });
      if (gone.length === 0) throw new ApiError('not_found', `No credentials are set for ${service}.`);
    },

    /** Internal: the plain OAuth-app credentials for the gateway's own use; undefined when no app is set. */
    async open(agentId: string, service: string): Promise<OpenedCredentials | undefined> {
      const [row] = await db.select().from(table).where(and(eq(table.agentId, agentId), eq(table.service, service))).limit(1);
      if (!row?.clientId || !row.clientSecretSealed) return undefined;
      return {
        clientId: row.clientId,
        clientSecret: openWithSecret(secret, CLIENT_SECRET_LABEL, row.clientSecretSealed),
      };
    },

    /** Internal: the plain webhook secret (with or without an OAuth app); null when none is set. */
    async webhookSecretOf(agentId: string, service: string): Promise<string | null> {
      const [row] = await db.select({ sealed: table.webhookSecretSealed }).from(table)
        .where(and(eq(table.agentId, agentId), eq(table.service, service))).limit(1);
      return row?.sealed ? openWithSecret(secret, WEBHOOK_SECRET_LABEL, row.sealed) : null;
    },
  };
}

export type CredentialsService = ReturnType<typeof createCredentialsService>;
