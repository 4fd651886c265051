import { z } from 'zod';
import { definedAttributes, parsePayload, payloadText, providerId } from './webhook-payload.ts';
import { constantTimeEqual, hmacSha256Hex, refused, singleHeader, VERIFIED } from './webhook-signing.ts';
import type { WebhookProvider } from './webhook-types.ts';

/** Linear tells receivers to refuse a `webhookTimestamp` more than a minute from their clock. */
const TOLERANCE_MS = 60_000;

/** Linear's entity type (`data`'s `__typename`) → our entity type; other types are ignored. */
const entityTypes: ReadonlyMap<string, string> = new Map([['Team', 'teams'], ['Project', 'projects']]);

const envelope = z.object({ action: payloadText, type: payloadText });
const removed = z.object({ data: z.object({ id: providerId }) });
const upserted = z.object({
  data: z.object({
    id: providerId,
    name: payloadText.min(1),
    /** Teams: the issue prefix (`ENG`). */
    key: payloadText.nullish(),
    /** Projects: `planned`, `started`… */
    state: payloadText.nullish(),
  }),
});

/** The signed body's `webhookTimestamp` (ms); `not_json` when the body is no JSON object at all. */
function webhookTimestampOf(rawBody: Buffer): number | undefined | 'not_json' {
  let payload: unknown;
  try { payload = JSON.parse(rawBody.toString('utf8')); } catch { return 'not_json'; }
  if (typeof payload !== 'object' || payload === null) return 'not_json';
  const timestamp = (payload as { webhookTimestamp?: unknown }).webhookTimestamp;
  return typeof timestamp === 'number' && Number.isFinite(timestamp) ? timestamp : undefined;
}

/**
 * Linear. Signature: `Linear-Signature: <hex HMAC-SHA256(signing secret, raw body)>`; the
 * freshness check is on the signed body's `webhookTimestamp` (ms), within a minute.
 */
export const linearWebhook: WebhookProvider = {
  verify({ rawBody, headers, secret, nowMs }) {
    const signature = singleHeader(headers, 'linear-signature');
    if (signature === undefined) return refused('The request is not signed: the Linear-Signature header is required.');
    if (!constantTimeEqual(signature, hmacSha256Hex(secret, rawBody))) {
      return refused('The signature does not match the body and this agent\'s Linear signing secret.');
    }
    // Only now is the body trusted enough to read the timestamp from it.
    const timestamp = webhookTimestampOf(rawBody);
    // Signed bytes that are not a JSON object: the receiver answers 400 for the payload and stores nothing.
    if (timestamp === 'not_json') return VERIFIED;
    if (timestamp === undefined) return refused('The payload has no numeric webhookTimestamp, so its freshness cannot be checked.');
    if (Math.abs(nowMs - timestamp) > TOLERANCE_MS) {
      return refused('The webhookTimestamp is more than a minute away from our clock: a stale or replayed request.');
    }
    return VERIFIED;
  },

  async interpret(payload) {
    const { action, type } = parsePayload(envelope, payload, 'Linear');
    const event = `${type}.${action}`;
    const entityType = entityTypes.get(type);
    if (entityType === undefined) return { kind: 'ignored', event };
    if (action === 'remove') {
      return { kind: 'changes', event, changes: [{ op: 'remove', type: entityType, ids: [parsePayload(removed, payload, 'Linear').data.id] }] };
    }
    if (action !== 'create' && action !== 'update') return { kind: 'ignored', event };
    const { id, name, key, state } = parsePayload(upserted, payload, 'Linear').data;
    const attributes = definedAttributes(entityType === 'teams' ? { key: key ?? undefined } : { state: state ?? undefined });
    return { kind: 'changes', event, changes: [{ op: 'upsert', type: entityType, entities: [{ id, name, attributes }] }] };
  },
};
