import { z } from 'zod';
import { definedAttributes, parsePayload, payloadText, providerId } from './webhook-payload.ts';
import { constantTimeEqual, hmacSha256Hex, refused, singleHeader, unixSecondsOf, VERIFIED, withinWindow } from './webhook-signing.ts';
import type { EntityChange, ReportedEntity, WebhookOutcome, WebhookProvider } from './webhook-types.ts';

/** Slack tells apps to refuse requests more than five minutes from their clock (replays). */
const TOLERANCE_SECONDS = 5 * 60;

const envelope = z.object({ type: payloadText });
const urlVerification = z.object({ challenge: payloadText.min(1) });
const callback = z.object({ event: z.object({ type: payloadText }) });

const channelObject = z.object({ id: providerId, name: payloadText.min(1), is_private: z.boolean().nullish() });
const channelEvent = z.object({ event: z.object({ channel: channelObject }) });
/** `channel_deleted`, `channel_archive`… carry the channel id alone. */
const channelIdEvent = z.object({ event: z.object({ channel: providerId }) });
const userEvent = z.object({
  event: z.object({
    user: z.object({
      id: providerId,
      name: payloadText.nullish(),
      real_name: payloadText.nullish(),
      deleted: z.boolean().nullish(),
      profile: z.object({ real_name: payloadText.nullish(), display_name: payloadText.nullish() }).nullish(),
    }),
  }),
});

type SlackChannel = z.infer<typeof channelObject>;
type SlackUser = z.infer<typeof userEvent>['event']['user'];

/**
 * `channel_created` is sent for public channels only and `group_rename` for private ones;
 * after a `channel_rename` without `is_private` the stored value stays.
 */
const privacyByKind: Readonly<Record<string, boolean | undefined>> = { channel_created: false, channel_rename: undefined, group_rename: true };

function channelOf(channel: SlackChannel, eventType: string): ReportedEntity {
  return { id: channel.id, name: channel.name, attributes: definedAttributes({ is_private: channel.is_private ?? privacyByKind[eventType] }) };
}

/**
 * `name` is the handle (`alice`), as the harvest has it; a display name only if it is absent.
 * The profile's e-mail is not kept: the harvest does not keep it either.
 */
function userOf(user: SlackUser): ReportedEntity {
  const name = user.name || user.profile?.display_name || user.real_name || user.profile?.real_name || undefined;
  return {
    id: user.id,
    ...(name ? { name } : {}),
    attributes: definedAttributes({
      real_name: user.real_name ?? user.profile?.real_name ?? undefined,
      deleted: user.deleted ?? undefined,
    }),
  };
}

const changed = (event: string, ...changes: EntityChange[]): WebhookOutcome => ({ kind: 'changes', event, changes });

/** The Events API event of an `event_callback`. `group_*` are the private-channel twins. */
function interpretEvent(payload: unknown, eventType: string): WebhookOutcome {
  const event = `event_callback/${eventType}`;
  switch (eventType) {
    case 'channel_created':
    case 'channel_rename':
    case 'group_rename':
      return changed(event, { op: 'upsert', type: 'channels', entities: [channelOf(parsePayload(channelEvent, payload, 'Slack').event.channel, eventType)] });
    case 'channel_deleted':
    case 'group_deleted':
      return changed(event, { op: 'remove', type: 'channels', ids: [parsePayload(channelIdEvent, payload, 'Slack').event.channel] });
    case 'channel_archive':
    case 'group_archive':
    case 'channel_unarchive':
    case 'group_unarchive': {
      // An archived channel still exists (conversations.list returns it) and policies may name
      // it, so it stays, marked. The event carries only the id: the stored name is kept.
      const id = parsePayload(channelIdEvent, payload, 'Slack').event.channel;
      return changed(event, { op: 'upsert', type: 'channels', entities: [{ id, attributes: { is_archived: eventType.endsWith('_archive') } }] });
    }
    case 'team_join':
    case 'user_change':
      // A deactivated user arrives as `user_change` with `deleted: true`; users.list still
      // returns them, so they stay too, marked.
      return changed(event, { op: 'upsert', type: 'users', entities: [userOf(parsePayload(userEvent, payload, 'Slack').event.user)] });
    default:
      return { kind: 'ignored', event };
  }
}

/**
 * Slack's Events API. Signature: `X-Slack-Signature: v0=<hex HMAC-SHA256(signing secret,
 * "v0:" + X-Slack-Request-Timestamp + ":" + raw body)>`, timestamp within five minutes.
 */
export const slackWebhook: WebhookProvider = {
  verify({ rawBody, headers, secret, nowMs }) {
    const signature = singleHeader(headers, 'x-slack-signature');
    const timestampText = singleHeader(headers, 'x-slack-request-timestamp');
    if (signature === undefined || timestampText === undefined) {
      return refused('The request is not signed: the X-Slack-Signature and X-Slack-Request-Timestamp headers are required.');
    }
    const timestamp = unixSecondsOf(timestampText);
    if (timestamp === undefined) return refused('The X-Slack-Request-Timestamp header is not a Unix time in seconds.');
    if (!withinWindow(timestamp, nowMs, TOLERANCE_SECONDS)) {
      return refused('The request timestamp is more than 5 minutes away from our clock: a stale or replayed request.');
    }
    const expected = `v0=${hmacSha256Hex(secret, `v0:${timestampText}:`, rawBody)}`;
    return constantTimeEqual(signature, expected) ? VERIFIED : refused('The signature does not match the body and this agent\'s Slack signing secret.');
  },

  async interpret(payload) {
    const { type } = parsePayload(envelope, payload, 'Slack');
    if (type === 'url_verification') return { kind: 'challenge', challenge: parsePayload(urlVerification, payload, 'Slack').challenge };
    if (type !== 'event_callback') return { kind: 'ignored', event: type };
    return interpretEvent(payload, parsePayload(callback, payload, 'Slack').event.type);
  },
};
