import { describe, expect, it } from 'vitest';
import { huggingfaceWebhook } from './huggingface-webhook.ts';
import { constantTimeEqual } from './webhook-signing.ts';
import type { StoredEntities } from './webhook-types.ts';

const SECRET = 'hf-webhook-secret-0123456789';
const nothingStored: StoredEntities = { get: async () => new Map() };

const verify = (headers: Record<string, string>) =>
  huggingfaceWebhook.verify({ rawBody: Buffer.from('{}'), headers, secret: SECRET, nowMs: 0 });

/** A payload as the Hub documents it (webhook version 3). */
const hubEvent = (action: string, scope: string, repo: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  event: { action, scope },
  repo: { id: '6633f3b4bb1e4c1a2c5e0f00', private: false, url: { web: 'https://huggingface.co/x', api: 'https://huggingface.co/api/x' }, owner: { id: '6633f3b4bb1e4c1a2c5e0f01' }, ...repo },
  webhook: { id: '6633f3b4bb1e4c1a2c5e0f02', version: 3 },
  ...extra,
});

describe('huggingface verify', () => {
  it('accepts the secret itself in X-Webhook-Secret', () => {
    expect(verify({ 'x-webhook-secret': SECRET })).toEqual({ ok: true });
  });

  it('refuses another secret, a prefix of it, and a missing header', () => {
    expect(verify({ 'x-webhook-secret': 'wrong' })).toMatchObject({ ok: false, failure: expect.stringMatching(/does not match/) });
    expect(verify({ 'x-webhook-secret': SECRET.slice(0, -1) }).ok).toBe(false);
    expect(verify({ 'x-webhook-secret': `${SECRET} ` }).ok).toBe(false);
    expect(verify({})).toMatchObject({ ok: false, failure: expect.stringMatching(/X-Webhook-Secret header is required/) });
  });

  it('compares whatever the lengths', () => {
    expect(constantTimeEqual('a', 'a')).toBe(true);
    expect(constantTimeEqual('a', 'ab')).toBe(false);
    expect(constantTimeEqual('', SECRET)).toBe(false);
  });
});

describe('huggingface interpret', () => {
  const interpret = (payload: unknown) => huggingfaceWebhook.interpret(payload, nothingStored);

  it('upserts a created model under its full name, displayed by its short name', async () => {
    expect(await interpret(hubEvent('create', 'repo', { type: 'model', name: 'acme/ranker-large' }))).toEqual({
      kind: 'changes', event: 'repo.create',
      changes: [{ op: 'upsert', type: 'models', entities: [{ id: 'acme/ranker-large', name: 'ranker-large', attributes: { private: false } }] }],
    });
  });

  it('refreshes on content and config updates, in the matching type', async () => {
    expect(await interpret(hubEvent('update', 'repo.content', { type: 'dataset', name: 'acme/support-tickets' }, { updatedRefs: [{ ref: 'refs/heads/main', oldSha: 'a', newSha: 'b' }] }))).toMatchObject({
      changes: [{ op: 'upsert', type: 'datasets', entities: [{ id: 'acme/support-tickets', name: 'support-tickets' }] }],
    });
    expect(await interpret(hubEvent('update', 'repo.config', { type: 'space', name: 'acme/demo-chat', private: true }, { updatedConfig: { private: true } }))).toMatchObject({
      changes: [{ op: 'upsert', type: 'spaces', entities: [{ id: 'acme/demo-chat', attributes: { private: true } }] }],
    });
  });

  it('removes a deleted repo, and replaces a moved one', async () => {
    expect(await interpret(hubEvent('delete', 'repo', { type: 'space', name: 'acme/leaderboard' }))).toMatchObject({
      changes: [{ op: 'remove', type: 'spaces', ids: ['acme/leaderboard'] }],
    });
    expect(await interpret(hubEvent('move', 'repo', { type: 'model', name: 'acme/sentiment-small' }, { movedTo: { name: 'acme-labs/sentiment-small', owner: { id: 'o' } } }))).toEqual({
      kind: 'changes', event: 'repo.move',
      changes: [
        { op: 'remove', type: 'models', ids: ['acme/sentiment-small'] },
        { op: 'upsert', type: 'models', entities: [{ id: 'acme-labs/sentiment-small', name: 'sentiment-small', attributes: { private: false } }] },
      ],
    });
  });

  it('ignores discussions, other repo types and unknown actions', async () => {
    const discussion = hubEvent('create', 'discussion', { type: 'model', name: 'acme/sentiment-small' }, { discussion: { id: 'd', num: 1, title: 'Hi' } });
    expect(await interpret(discussion)).toEqual({ kind: 'ignored', event: 'discussion.create' });
    expect(await interpret(hubEvent('create', 'repo', { type: 'kernel', name: 'acme/k' }))).toEqual({ kind: 'ignored', event: 'repo.create' });
    expect(await interpret(hubEvent('create', 'repo.content', { type: 'model', name: 'acme/m' }))).toEqual({ kind: 'ignored', event: 'repo.content.create' });
  });

  it('refuses a repo event with a malformed repo or move', async () => {
    await expect(interpret(hubEvent('create', 'repo', { type: 'model', name: 'a/b/c' }))).rejects.toMatchObject({ code: 'invalid_request', details: { field: 'repo.name' } });
    await expect(interpret({ event: { action: 'create', scope: 'repo' } })).rejects.toMatchObject({ code: 'invalid_request', details: { field: 'repo' } });
    await expect(interpret(hubEvent('move', 'repo', { type: 'model', name: 'acme/m' }))).rejects.toMatchObject({ code: 'invalid_request', details: { field: 'movedTo' } });
  });
});
