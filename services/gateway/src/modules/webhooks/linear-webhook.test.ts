import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { linearWebhook } from './linear-webhook.ts';
import type { StoredEntities } from './webhook-types.ts';

const SECRET = 'lin_wh_0123456789abcdef';
const NOW_MS = 1_760_000_000_000;
const nothingStored: StoredEntities = { get: async () => new Map() };

/** Signs as Linear documents it: Linear-Signature = hex(HMAC-SHA256(secret, raw body)). */
const signature = (body: string, secret = SECRET) => createHmac('sha256', secret).update(body).digest('hex');

const event = (fields: Record<string, unknown>, webhookTimestamp: unknown = NOW_MS) => JSON.stringify({
  createdAt: '2025-10-09T08:53:20.000Z', organizationId: 'org_1', url: 'https://linear.app/acme', webhookId: 'wh_1', webhookTimestamp, ...fields,
});

const verify = (body: string, headers: Record<string, string>, nowMs = NOW_MS) =>
  linearWebhook.verify({ rawBody: Buffer.from(body), headers, secret: SECRET, nowMs });

describe('linear verify', () => {
  const body = event({ action: 'create', type: 'Project', data: { id: 'proj_new', name: 'Billing' } });

  it('accepts a body signed with the secret and a fresh webhookTimestamp', () => {
    expect(verify(body, { 'linear-signature': signature(body) })).toEqual({ ok: true });
  });

  it('refuses a tampered body, another secret, and a missing header', () => {
    expect(verify(body.replace('Billing', 'Bolling'), { 'linear-signature': signature(body) }).ok).toBe(false);
    expect(verify(body, { 'linear-signature': signature(body, 'other') })).toMatchObject({ ok: false, failure: expect.stringMatching(/signature does not match/) });
    expect(verify(body, {})).toMatchObject({ ok: false, failure: expect.stringMatching(/Linear-Signature/) });
  });

  it('refuses a webhookTimestamp more than a minute away, though correctly signed', () => {
    const stale = event({ action: 'create', type: 'Project', data: { id: 'p', name: 'P' } }, NOW_MS - 61_000);
    expect(verify(stale, { 'linear-signature': signature(stale) })).toMatchObject({ ok: false, failure: expect.stringMatching(/a minute/) });
    const ahead = event({ action: 'create', type: 'Project', data: { id: 'p', name: 'P' } }, NOW_MS + 61_000);
    expect(verify(ahead, { 'linear-signature': signature(ahead) }).ok).toBe(false);
    const recent = event({ action: 'create', type: 'Project', data: { id: 'p', name: 'P' } }, NOW_MS - 59_000);
    expect(verify(recent, { 'linear-signature': signature(recent) }).ok).toBe(true);
  });

  it('refuses a signed JSON body without a numeric webhookTimestamp', () => {
    const withoutTimestamp = JSON.stringify({ action: 'create', type: 'Team', data: { id: 't', name: 'T' } });
    const withTimestamps = ['1760000000000', null].map((timestamp) => event({ action: 'create', type: 'Team', data: { id: 't', name: 'T' } }, timestamp));
    for (const body of [withoutTimestamp, ...withTimestamps]) {
      expect(verify(body, { 'linear-signature': signature(body) })).toMatchObject({ ok: false, failure: expect.stringMatching(/webhookTimestamp/) });
    }
  });

  it('lets signed bytes that are not JSON through, for the receiver to refuse as malformed', () => {
    expect(verify('not json', { 'linear-signature': signature('not json') })).toEqual({ ok: true });
    expect(verify('not json', { 'linear-signature': signature('other') }).ok).toBe(false);
  });
});

describe('linear interpret', () => {
  const interpret = (body: string) => linearWebhook.interpret(JSON.parse(body), nothingStored);

  it('upserts created and updated teams and projects with their display fields', async () => {
    expect(await interpret(event({ action: 'create', type: 'Team', data: { id: 'team_des', name: 'Design', key: 'DES', private: false } }))).toEqual({
      kind: 'changes', event: 'Team.create',
      changes: [{ op: 'upsert', type: 'teams', entities: [{ id: 'team_des', name: 'Design', attributes: { key: 'DES' } }] }],
    });
    expect(await interpret(event({ action: 'update', type: 'Project', data: { id: 'proj_api_v2', name: 'API v3', state: 'started', teamIds: ['team_eng'] }, updatedFrom: { name: 'API v2' } }))).toEqual({
      kind: 'changes', event: 'Project.update',
      changes: [{ op: 'upsert', type: 'projects', entities: [{ id: 'proj_api_v2', name: 'API v3', attributes: { state: 'started' } }] }],
    });
  });

  it('removes on remove', async () => {
    expect(await interpret(event({ action: 'remove', type: 'Project', data: { id: 'proj_onboarding' } }))).toMatchObject({
      changes: [{ op: 'remove', type: 'projects', ids: ['proj_onboarding'] }],
    });
  });

  it('ignores other types and actions', async () => {
    expect(await interpret(event({ action: 'create', type: 'Issue', data: { id: 'i', title: 'Bug' } }))).toEqual({ kind: 'ignored', event: 'Issue.create' });
    expect(await interpret(event({ action: 'archive', type: 'Team', data: { id: 't' } }))).toEqual({ kind: 'ignored', event: 'Team.archive' });
    expect(await interpret(event({ action: 'create', type: 'constructor', data: {} }))).toEqual({ kind: 'ignored', event: 'constructor.create' });
  });

  it('refuses a known kind with a malformed payload', async () => {
    await expect(interpret(event({ action: 'create', type: 'Team', data: { id: 't' } }))).rejects.toMatchObject({ code: 'invalid_request', details: { field: 'data.name' } });
    await expect(interpret(event({ type: 'Team', data: { id: 't' } }))).rejects.toMatchObject({ code: 'invalid_request', details: { field: 'action' } });
  });
});
