import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ApiError } from '@portcullis/core';
import { slackWebhook } from './slack-webhook.ts';
import type { StoredEntities } from './webhook-types.ts';

const SECRET = 'slack-signing-secret-0123456789abcdef';
const NOW_MS = 1_760_000_000_000;
const nothingStored: StoredEntities = { get: async () => new Map() };

/** Signs as Slack documents it: v0=hex(HMAC-SHA256(secret, "v0:" + timestamp + ":" + body)). */
function slackHeaders(body: string, options: { secret?: string; timestamp?: number } = {}) {
  const timestamp = String(options.timestamp ?? NOW_MS / 1000);
  const signature = `v0=${createHmac('sha256', options.secret ?? SECRET).update(`v0:${timestamp}:${body}`).digest('hex')}`;
  return { 'x-slack-request-timestamp': timestamp, 'x-slack-signature': signature };
}

const verify = (body: string, headers: Record<string, string>, nowMs = NOW_MS) =>
  slackWebhook.verify({ rawBody: Buffer.from(body), headers, secret: SECRET, nowMs });

const callback = (event: Record<string, unknown>) => ({ token: 'x', team_id: 'T0001', api_app_id: 'A0001', type: 'event_callback', event_id: 'Ev0001', event_time: 1, event });

describe('slack verify', () => {
  const body = JSON.stringify(callback({ type: 'channel_created', channel: { id: 'C0009', name: 'launch' } }));

  it('accepts the example from Slack\'s "Verifying requests" guide', () => {
    const example = 'token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c';
    const verdict = slackWebhook.verify({
      rawBody: Buffer.from(example),
      headers: { 'x-slack-request-timestamp': '1531420618', 'x-slack-signature': 'v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503' },
      secret: '8f742231b10e8888abcd99yyyzzz85a5',
      nowMs: 1531420618_000 + 30_000,
    });
    expect(verdict).toEqual({ ok: true });
  });

  it('accepts a body signed with the secret', () => {
    expect(verify(body, slackHeaders(body))).toEqual({ ok: true });
  });

  it('verifies the raw bytes: the same JSON re-serialised with other spacing fails', () => {
    const respaced = JSON.stringify(JSON.parse(body), null, 2);
    expect(verify(respaced, slackHeaders(body))).toMatchObject({ ok: false, failure: expect.stringMatching(/signature does not match/) });
  });

  it('refuses a tampered body', () => {
    expect(verify(body.replace('launch', 'lunch'), slackHeaders(body)).ok).toBe(false);
  });

  it('refuses a signature made with another secret', () => {
    expect(verify(body, slackHeaders(body, { secret: 'someone-else' })).ok).toBe(false);
  });

  it('refuses a timestamp more than five minutes old or ahead, even when correctly signed', () => {
    const stale = slackHeaders(body, { timestamp: NOW_MS / 1000 - 301 });
    expect(verify(body, stale)).toMatchObject({ ok: false, failure: expect.stringMatching(/5 minutes/) });
    expect(verify(body, slackHeaders(body, { timestamp: NOW_MS / 1000 + 301 })).ok).toBe(false);
    expect(verify(body, slackHeaders(body, { timestamp: NOW_MS / 1000 - 299 })).ok).toBe(true);
  });

  it('refuses missing headers and a non-numeric timestamp', () => {
    const headers = slackHeaders(body);
    expect(verify(body, {})).toMatchObject({ ok: false, failure: expect.stringMatching(/not signed/) });
    expect(verify(body, { 'x-slack-signature': headers['x-slack-signature'] }).ok).toBe(false);
    expect(verify(body, { 'x-slack-request-timestamp': headers['x-slack-request-timestamp'] }).ok).toBe(false);
    expect(verify(body, { ...headers, 'x-slack-request-timestamp': 'yesterday' }).ok).toBe(false);
  });

  it('never puts the expected signature in the failure', () => {
    const verdict = verify(body.replace('launch', 'lunch'), slackHeaders(body));
    const expected = slackHeaders(body.replace('launch', 'lunch'))['x-slack-signature'];
    expect(verdict.ok).toBe(false);
    expect(JSON.stringify(verdict)).not.toContain(expected.slice(3, 15));
  });
});

describe('slack interpret', () => {
  const interpret = (payload: unknown, stored = nothingStored) => slackWebhook.interpret(payload, stored);

  it('answers url_verification with its challenge', async () => {
    expect(await interpret({ token: 'x', challenge: '3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P', type: 'url_verification' }))
      .toEqual({ kind: 'challenge', challenge: '3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P' });
  });

  it('upserts a created or renamed channel, private for group_rename', async () => {
    expect(await interpret(callback({ type: 'channel_created', channel: { id: 'C0009', name: 'launch', created: 1, creator: 'U0001' } }))).toEqual({
      kind: 'changes', event: 'event_callback/channel_created',
      changes: [{ op: 'upsert', type: 'channels', entities: [{ id: 'C0009', name: 'launch', attributes: { is_private: false } }] }],
    });
    // A rename does not say whether the channel is private: the stored value stays.
    expect(await interpret(callback({ type: 'channel_rename', channel: { id: 'C0001', name: 'all-hands', created: 1 } }))).toEqual({
      kind: 'changes', event: 'event_callback/channel_rename',
      changes: [{ op: 'upsert', type: 'channels', entities: [{ id: 'C0001', name: 'all-hands', attributes: {} }] }],
    });
    expect(await interpret(callback({ type: 'group_rename', channel: { id: 'C0004', name: 'sev1', created: 1 } }))).toMatchObject({
      changes: [{ op: 'upsert', type: 'channels', entities: [{ id: 'C0004', name: 'sev1', attributes: { is_private: true } }] }],
    });
  });

  it('removes a deleted channel and marks an archived one without naming it', async () => {
    expect(await interpret(callback({ type: 'channel_deleted', channel: 'C0002' }))).toMatchObject({ changes: [{ op: 'remove', type: 'channels', ids: ['C0002'] }] });
    expect(await interpret(callback({ type: 'group_deleted', channel: 'C0004' }))).toMatchObject({ changes: [{ op: 'remove', type: 'channels', ids: ['C0004'] }] });
    expect(await interpret(callback({ type: 'channel_archive', channel: 'C0003', user: 'U0001' }))).toMatchObject({
      changes: [{ op: 'upsert', type: 'channels', entities: [{ id: 'C0003', attributes: { is_archived: true } }] }],
    });
    expect(await interpret(callback({ type: 'channel_unarchive', channel: 'C0003', user: 'U0001' }))).toStrictEqual({
      kind: 'changes', event: 'event_callback/channel_unarchive',
      changes: [{ op: 'upsert', type: 'channels', entities: [{ id: 'C0003', attributes: { is_archived: false } }] }],
    });
  });

  it('upserts a joining or changed user by handle, keeping no e-mail', async () => {
    const user = { id: 'U0004', team_id: 'T0001', name: 'dave', real_name: 'Dave Moe', deleted: false, profile: { real_name: 'Dave Moe', display_name: 'dave', email: 'dave@example.com' } };
    expect(await interpret(callback({ type: 'team_join', user }))).toEqual({
      kind: 'changes', event: 'event_callback/team_join',
      changes: [{ op: 'upsert', type: 'users', entities: [{ id: 'U0004', name: 'dave', attributes: { real_name: 'Dave Moe', deleted: false } }] }],
    });
    expect(await interpret(callback({ type: 'user_change', user: { ...user, deleted: true } }))).toMatchObject({
      changes: [{ op: 'upsert', type: 'users', entities: [{ id: 'U0004', attributes: { deleted: true } }] }],
    });
  });

  it('ignores other event kinds and other envelope types', async () => {
    expect(await interpret(callback({ type: 'message', channel: 'C0001', text: 'hi' }))).toEqual({ kind: 'ignored', event: 'event_callback/message' });
    expect(await interpret({ type: 'app_rate_limited', minute_rate_limited: 1 })).toEqual({ kind: 'ignored', event: 'app_rate_limited' });
  });

  it('refuses a known event kind with a malformed payload as invalid_request naming the field', async () => {
    const error = await interpret(callback({ type: 'channel_created', channel: { name: 'no-id' } })).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({ code: 'invalid_request', details: { field: 'event.channel.id' } });
    await expect(interpret({ type: 'url_verification' })).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(interpret([1, 2])).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(interpret(callback({ type: 'channel_rename', channel: { id: 'C0001', name: 'nul\u0000name' } }))).rejects.toMatchObject({ code: 'invalid_request' });
  });
});
