import { ApiError, type Database } from '@portcullis/core';
import { createCredentialsService, WEBHOOK_SECRET_SERVICES } from '../connectors/credentials-service.ts';
import { createEntityStore, type EntityRecord } from '../entities/entity-store.ts';
import { huggingfaceWebhook } from './huggingface-webhook.ts';
import { linearWebhook } from './linear-webhook.ts';
import { slackWebhook } from './slack-webhook.ts';
import { storedEntitiesOf } from './stored-entities.ts';
import { fieldWithControlCharacter } from '../../plugins/text-input-guard.ts';
import { stripeWebhook } from './stripe-webhook.ts';
import type { EntityChange, WebhookHeaders, WebhookProvider } from './webhook-types.ts';

/** One provider per connector that takes a webhook secret (`WEBHOOK_SECRET_SERVICES`). */
export const webhookProviders: ReadonlyMap<string, WebhookProvider> = new Map([
  ['slack', slackWebhook],
  ['linear', linearWebhook],
  ['stripe', stripeWebhook],
  ['huggingface', huggingfaceWebhook],
]);

/**
 * The one answer for "no such agent" and "no webhook secret for this connector", so a caller
 * cannot learn which agents exist.
 */
const NO_ENDPOINT = 'No webhook endpoint is configured for this agent and service.';

export interface WebhookDelivery {
  agentId: string;
  service: string;
  /** The body exactly as received: signatures are over these bytes. */
  rawBody: Buffer;
  headers: WebhookHeaders;
}

export type WebhookAnswer = { received: true } | { challenge: string };

/** Where the service reports what happened; never given a secret, a signature or a body. */
export interface WebhookLog {
  info(details: object, message: string): void;
  warn(details: object, message: string): void;
}

/** The verified body as JSON; like every other `/api` body, control characters in it are refused. */
function parseJson(rawBody: Buffer): unknown {
  let parsed: unknown;
  try {
    parsed = JSON.parse(rawBody.toString('utf8'));
  } catch {
    throw new ApiError('invalid_request', 'The body is not valid JSON.', { field: 'body', in: 'body' });
  }
  const field = fieldWithControlCharacter(parsed);
  if (field !== undefined) throw new ApiError('invalid_request', `Invalid body field "${field || 'body'}": control characters are not allowed.`, { field: field || 'body', in: 'body' });
  return parsed;
}

/**
 * Inbound provider webhooks: find the agent's webhook secret, verify the provider's
 * signature over the raw bytes, then refresh the harvested entities the event is about.
 */
export function createWebhookService(deps: { db: Database; secret: string; now?: () => number }) {
  const { db } = deps;
  const credentials = createCredentialsService({ db, secret: deps.secret });
  const now = deps.now ?? Date.now;

  /** All of one event's changes in one transaction (a Hub `move` is a remove and an upsert). */
  async function apply(agentId: string, service: string, changes: EntityChange[]): Promise<void> {
    await db.transaction(async (tx) => {
      const txDb = tx as unknown as Database;
      const store = createEntityStore(txDb);
      const stored = storedEntitiesOf(txDb, agentId, service);
      for (const change of changes) {
        const address = { agentId, service, type: change.type };
        if (change.op === 'remove') {
          await store.remove(address, change.ids);
          continue;
        }
        // Events carry part of an entity: what they report wins, the rest of the stored entity stays.
        const known = await stored.get(change.type, change.entities.map((e) => e.id));
        const records: EntityRecord[] = change.entities.flatMap((reported) => {
          const before = known.get(reported.id);
          const name = reported.name ?? before?.name;
          return name === undefined ? [] : [{ id: reported.id, name, attributes: { ...before?.attributes, ...reported.attributes } }];
        });
        await store.upsert(address, records, null);
      }
    });
  }

  return {
    /**
     * Errors: 404 `not_found` for a connector without webhooks, and (one message) for an agent
     * that does not exist or has no webhook secret for it; 401 `unauthenticated` when the
     * provider's check fails (the message says which check, never the expected value); 400
     * `invalid_request` for a verified body that is not the JSON the event kind needs.
     */
    async receive(delivery: WebhookDelivery, log: WebhookLog): Promise<WebhookAnswer> {
      const { agentId, service, rawBody, headers } = delivery;
      const provider = webhookProviders.get(service);
      if (provider === undefined) {
        throw new ApiError('not_found', `No webhooks are received for "${service.slice(0, 64)}": only ${[...WEBHOOK_SECRET_SERVICES].join(', ')} send them.`);
      }
      const webhookSecret = await credentials.webhookSecretOf(agentId, service);
      if (!webhookSecret) throw new ApiError('not_found', NO_ENDPOINT);

      const verification = provider.verify({ rawBody, headers, secret: webhookSecret, nowMs: now() });
      if (!verification.ok) {
        log.warn({ agentId, service, failure: verification.failure }, 'webhook refused');
        throw new ApiError('unauthenticated', verification.failure);
      }

      const outcome = await provider.interpret(parseJson(rawBody), storedEntitiesOf(db, agentId, service));
      if (outcome.kind === 'challenge') return { challenge: outcome.challenge };
      if (outcome.kind === 'changes') await apply(agentId, service, outcome.changes);
      log.info({ agentId, service, event: outcome.event, applied: outcome.kind === 'changes' }, 'webhook received');
      return { received: true };
    },
  };
}

export type WebhookService = ReturnType<typeof createWebhookService>;
