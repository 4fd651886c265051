import { z } from 'zod';
import { definedAttributes, parsePayload, payloadText, providerId } from './webhook-payload.ts';
import { constantTimeEqual, refused, singleHeader, VERIFIED } from './webhook-signing.ts';
import type { EntityChange, ReportedEntity, WebhookOutcome, WebhookProvider } from './webhook-types.ts';

/** The Hub's repo type → our entity type; other repo types are ignored. */
const entityTypes: ReadonlyMap<string, string> = new Map([['model', 'models'], ['dataset', 'datasets'], ['space', 'spaces']]);

const envelope = z.object({ event: z.object({ action: payloadText, scope: payloadText }) });
const repoName = providerId.regex(/^[^/]+(\/[^/]+)?$/, 'must be "name" or "owner/name"');
const repoEvent = z.object({ repo: z.object({ type: payloadText, name: repoName, private: z.boolean().nullish() }) });
const movedEvent = z.object({ movedTo: z.object({ name: repoName }) });

/**
 * The entity id is the repo's full name `owner/name`, as policies and the harvest name it (the
 * payload's `repo.id` is the Hub's internal object id); the display name is the part after the owner.
 */
function repoOf(fullName: string, isPrivate: boolean | null | undefined): ReportedEntity {
  return { id: fullName, name: fullName.slice(fullName.indexOf('/') + 1), attributes: definedAttributes({ private: isPrivate ?? undefined }) };
}

function changesOf(action: string, scope: string, payload: unknown): EntityChange[] | undefined {
  const { repo } = parsePayload(repoEvent, payload, 'Hugging Face');
  const type = entityTypes.get(repo.type);
  if (type === undefined) return undefined;
  if (scope !== 'repo') {
    // `repo.content` (new commits) and `repo.config` (settings, visibility): the repo still exists.
    return action === 'update' ? [{ op: 'upsert', type, entities: [repoOf(repo.name, repo.private)] }] : undefined;
  }
  switch (action) {
    case 'create':
    case 'update':
      return [{ op: 'upsert', type, entities: [repoOf(repo.name, repo.private)] }];
    case 'delete':
      return [{ op: 'remove', type, ids: [repo.name] }];
    case 'move': {
      // Renamed or transferred: the id is the name, so the old entity goes and the new one comes.
      const { movedTo } = parsePayload(movedEvent, payload, 'Hugging Face');
      return [{ op: 'remove', type, ids: [repo.name] }, { op: 'upsert', type, entities: [repoOf(movedTo.name, repo.private)] }];
    }
    default:
      return undefined;
  }
}

/**
 * Hugging Face Hub. Not a signature: the Hub sends the webhook's secret itself in
 * `X-Webhook-Secret`, compared in constant time. No timestamp, so no replay window (009).
 */
export const huggingfaceWebhook: WebhookProvider = {
  verify({ headers, secret }) {
    const presented = singleHeader(headers, 'x-webhook-secret');
    if (presented === undefined) return refused('The request carries no secret: the X-Webhook-Secret header is required.');
    return constantTimeEqual(presented, secret) ? VERIFIED : refused('The X-Webhook-Secret header does not match this agent\'s Hugging Face webhook secret.');
  },

  async interpret(payload): Promise<WebhookOutcome> {
    const { action, scope } = parsePayload(envelope, payload, 'Hugging Face').event;
    const event = `${scope}.${action}`;
    // Discussions and comments change no harvested entity.
    if (scope !== 'repo' && !scope.startsWith('repo.')) return { kind: 'ignored', event };
    const changes = changesOf(action, scope, payload);
    return changes ? { kind: 'changes', event, changes } : { kind: 'ignored', event };
  },
};
