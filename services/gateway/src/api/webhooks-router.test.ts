import { createHmac, randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { and, eq } from 'drizzle-orm';
import { schema } from '@portcullis/core';
import { createApiHarness, signInRoleActors, withoutRequestId, type ApiHarness, type RoleActors } from '../testing/index.ts';
import { createEntityStore, type EntityStore, type HarvestedEntity } from '../modules/entities/entity-store.ts';
import { WEBHOOK_BODY_LIMIT_BYTES } from './webhooks-router.ts';

/**
 * `POST /api/webhooks/:agentId/:service` over the real app and database: agents and their
 * webhook secrets are set up through the owner's REST API, deliveries are signed here the
 * way each provider documents it, and the result is read back through the entity store.
 */

const SECRETS = {
  slack: 'slack-signing-secret-7f3a',
  linear: 'lin_wh_secret_2b9c',
  stripe: 'whsec_stripe_secret_51d0',
  huggingface: 'hf-hook-secret-e6a4',
} as const;
type WebhookService = keyof typeof SECRETS;

const clock = { now: Date.now() };
let h: ApiHarness;
let actors: RoleActors;
let store: EntityStore;
beforeAll(async () => {
  h = await createApiHarness({}, { now: () => clock.now });
  actors = await signInRoleActors(h, 'webhooks');
  store = createEntityStore(h.db);
});
afterAll(async () => { await h.close(); });
afterEach(() => { clock.now = Date.now(); });

/** A fresh agent whose owner set credentials with a webhook secret for each of the four. */
async function agentWithSecrets(): Promise<string> {
  const agentId = await actors.agentWithMembers({ name: 'Hooked' });
  for (const [service, webhookSecret] of Object.entries(SECRETS)) {
    const res = await h.request({
      method: 'PUT', url: `/api/agents/${agentId}/services/${service}/credentials`, cookie: actors.cookieOf.owner!,
      payload: { clientId: `${service}-app`, clientSecret: `${service}-client-secret`, webhookSecret },
    });
    expect(res.statusCode).toBe(200);
  }
  return agentId;
}

/** As a provider calls: no cookie, no Origin, the body as the exact bytes that were signed. */
const deliver = (agentId: string, service: string, body: string, headers: Record<string, string>) => h.app.inject({
  method: 'POST', url: `/api/webhooks/${agentId}/${service}`, payload: body,
  headers: { 'content-type': 'application/json', ...headers },
});

const nowSeconds = () => Math.floor(clock.now / 1000);

function slackHeaders(body: string, options: { secret?: string; timestamp?: number } = {}): Record<string, string> {
  const timestamp = String(options.timestamp ?? nowSeconds());
  const signature = createHmac('sha256', options.secret ?? SECRETS.slack).update(`v0:${timestamp}:${body}`).digest('hex');
  return { 'x-slack-request-timestamp': timestamp, 'x-slack-signature': `v0=${signature}` };
}
const linearHeaders = (body: string, secret: string = SECRETS.linear) => ({ 'linear-signature': createHmac('sha256', secret).update(body).digest('hex') });
function stripeHeaders(body: string, options: { secret?: string; timestamp?: number } = {}): Record<string, string> {
  const t = options.timestamp ?? nowSeconds();
  return { 'stripe-signature': `t=${t},v1=${createHmac('sha256', options.secret ?? SECRETS.stripe).update(`${t}.${body}`).digest('hex')}` };
}
const hubHeaders = (secret: string = SECRETS.huggingface) => ({ 'x-webhook-secret': secret });

const slackEvent = (event: Record<string, unknown>) => JSON.stringify({ token: 't', team_id: 'T0001', api_app_id: 'A0001', type: 'event_callback', event_id: 'Ev1', event_time: 1, event });
const linearEvent = (fields: Record<string, unknown>) => JSON.stringify({ organizationId: 'org_1', webhookId: 'wh_1', webhookTimestamp: clock.now, ...fields });
const stripeEvent = (type: string, object: Record<string, unknown>) => JSON.stringify({ id: 'evt_1', object: 'event', created: nowSeconds(), type, data: { object } });
const hubEvent = (action: string, scope: string, repo: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ event: { action, scope }, repo: { id: '6633f3b4bb1e4c1a2c5e0f00', private: false, ...repo }, webhook: { id: 'w', version: 3 }, ...extra });

async function entitiesOf(agentId: string, service: WebhookService, type: string): Promise<HarvestedEntity[]> {
  return (await store.list({ agentId, service, type }, { limit: 100, offset: 0 })).entities;
}
const harvestersOf = async (agentId: string) =>
  (await h.db.select({ harvestedBy: schema.harvestedEntities.harvestedBy }).from(schema.harvestedEntities).where(eq(schema.harvestedEntities.agentId, agentId))).map((r) => r.harvestedBy);
const countOf = async (agentId: string) =>
  (await h.db.select().from(schema.harvestedEntities).where(and(eq(schema.harvestedEntities.agentId, agentId)))).length;

describe('Slack', () => {
  it('a signed channel_created stores the channel as harvested by no member', async () => {
    const agentId = await agentWithSecrets();
    const body = slackEvent({ type: 'channel_created', channel: { id: 'C0009', name: 'launch', created: 1, creator: 'U0001' } });
    const res = await deliver(agentId, 'slack', body, slackHeaders(body));
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ received: true });
    expect(await entitiesOf(agentId, 'slack', 'channels')).toMatchObject([{ id: 'C0009', name: 'launch', attributes: { is_private: false } }]);
    expect(await harvestersOf(agentId)).toEqual([null]);
  });

  it('a signed event whose JSON carries a NUL is refused with 400 and stores nothing', async () => {
    const agentId = await agentWithSecrets();
    const body = slackEvent({ type: 'channel_created', channel: { id: 'C0010', name: 'la\u0000unch', created: 1, creator: 'U0001' } });
    const res = await deliver(agentId, 'slack', body, slackHeaders(body));
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: { code: 'invalid_request', details: { field: 'event.channel.name', in: 'body' } } });
    expect(await entitiesOf(agentId, 'slack', 'channels')).toEqual([]);
  });

  it('a rename keeps what the harvest knew; archive marks, delete removes; a name-less report of an unknown channel stores nothing', async () => {
    const agentId = await agentWithSecrets();
    const address = { agentId, service: 'slack', type: 'channels' };
    await store.upsert(address, [
      { id: 'C0001', name: 'general', attributes: { is_private: false, topic: 'Company-wide announcements' } },
      { id: 'C0002', name: 'random', attributes: { is_private: false, topic: 'Anything goes' } },
    ], null);

    const rename = slackEvent({ type: 'channel_rename', channel: { id: 'C0001', name: 'all-hands', created: 1 } });
    expect((await deliver(agentId, 'slack', rename, slackHeaders(rename))).statusCode).toBe(200);
    const archive = slackEvent({ type: 'channel_archive', channel: 'C0001', user: 'U0001' });
    expect((await deliver(agentId, 'slack', archive, slackHeaders(archive))).statusCode).toBe(200);
    const deleted = slackEvent({ type: 'channel_deleted', channel: 'C0002' });
    expect((await deliver(agentId, 'slack', deleted, slackHeaders(deleted))).statusCode).toBe(200);
    const unknownArchived = slackEvent({ type: 'channel_archive', channel: 'C0404', user: 'U0001' });
    expect((await deliver(agentId, 'slack', unknownArchived, slackHeaders(unknownArchived))).statusCode).toBe(200);

    expect(await entitiesOf(agentId, 'slack', 'channels')).toEqual([
      expect.objectContaining({ id: 'C0001', name: 'all-hands', attributes: { is_private: false, topic: 'Company-wide announcements', is_archived: true } }),
    ]);
  });

  it('team_join adds a user', async () => {
    const agentId = await agentWithSecrets();
    const body = slackEvent({ type: 'team_join', user: { id: 'U0004', name: 'dave', real_name: 'Dave Moe', profile: { email: 'dave@example.com' } } });
    expect((await deliver(agentId, 'slack', body, slackHeaders(body))).statusCode).toBe(200);
    expect(await entitiesOf(agentId, 'slack', 'users')).toMatchObject([{ id: 'U0004', name: 'dave', attributes: { real_name: 'Dave Moe' } }]);
  });

  it('url_verification answers the challenge once the signature verifies, and only then', async () => {
    const agentId = await agentWithSecrets();
    const body = JSON.stringify({ token: 'Jhj5dZrVaK7ZwHHjRyZWjbDl', challenge: '3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P', type: 'url_verification' });
    const res = await deliver(agentId, 'slack', body, slackHeaders(body));
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ challenge: '3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P' });

    const forged = await deliver(agentId, 'slack', body, slackHeaders(body, { secret: 'guess' }));
    expect(forged.statusCode).toBe(401);
    expect(forged.body).not.toContain('3eZbrw1a');
  });
});

describe('Linear, Stripe, Hugging Face', () => {
  it('Linear: a created team is stored, a removed project goes', async () => {
    const agentId = await agentWithSecrets();
    await store.upsert({ agentId, service: 'linear', type: 'projects' }, [{ id: 'proj_onboarding', name: 'Onboarding revamp' }], null);
    const created = linearEvent({ action: 'create', type: 'Team', data: { id: 'team_des', name: 'Design', key: 'DES' } });
    expect((await deliver(agentId, 'linear', created, linearHeaders(created))).statusCode).toBe(200);
    const removed = linearEvent({ action: 'remove', type: 'Project', data: { id: 'proj_onboarding', name: 'Onboarding revamp' } });
    expect((await deliver(agentId, 'linear', removed, linearHeaders(removed))).statusCode).toBe(200);
    expect(await entitiesOf(agentId, 'linear', 'teams')).toMatchObject([{ id: 'team_des', name: 'Design', attributes: { key: 'DES' } }]);
    expect(await entitiesOf(agentId, 'linear', 'projects')).toEqual([]);
  });

  it('Stripe: customers and subscriptions, the subscription named from the harvested customer and product', async () => {
    const agentId = await agentWithSecrets();
    await store.upsert({ agentId, service: 'stripe', type: 'products' }, [{ id: 'prod_0001', name: 'Pro plan', attributes: { active: true } }], null);
    const customer = stripeEvent('customer.created', { id: 'cus_0003', object: 'customer', name: 'Carol Poe', email: 'carol@example.com' });
    // Also sent with the content type's charset parameter, as Stripe does.
    expect((await deliver(agentId, 'stripe', customer, { ...stripeHeaders(customer), 'content-type': 'application/json; charset=utf-8' })).statusCode).toBe(200);
    const subscription = stripeEvent('customer.subscription.created', {
      id: 'sub_0003', object: 'subscription', customer: 'cus_0003', status: 'active', items: { object: 'list', data: [{ id: 'si_1', price: { id: 'price_1', product: 'prod_0001' } }] },
    });
    expect((await deliver(agentId, 'stripe', subscription, stripeHeaders(subscription))).statusCode).toBe(200);
    expect(await entitiesOf(agentId, 'stripe', 'customers')).toMatchObject([{ id: 'cus_0003', name: 'Carol Poe' }]);
    expect(await entitiesOf(agentId, 'stripe', 'subscriptions')).toMatchObject([{ id: 'sub_0003', name: 'Carol Poe: Pro plan', attributes: { customer: 'cus_0003', status: 'active' } }]);

    const deleted = stripeEvent('product.deleted', { id: 'prod_0001', object: 'product', name: 'Pro plan' });
    expect((await deliver(agentId, 'stripe', deleted, stripeHeaders(deleted))).statusCode).toBe(200);
    expect(await entitiesOf(agentId, 'stripe', 'products')).toEqual([]);
  });

  it('Hugging Face: a moved model is replaced under its new name', async () => {
    const agentId = await agentWithSecrets();
    await store.upsert({ agentId, service: 'huggingface', type: 'models' }, [{ id: 'acme/sentiment-small', name: 'sentiment-small', attributes: { task: 'text-classification' } }], null);
    const body = hubEvent('move', 'repo', { type: 'model', name: 'acme/sentiment-small' }, { movedTo: { name: 'acme-labs/sentiment-small', owner: { id: 'o' } } });
    const res = await deliver(agentId, 'huggingface', body, hubHeaders());
    expect(res.statusCode).toBe(200);
    expect((await entitiesOf(agentId, 'huggingface', 'models')).map((e) => e.id)).toEqual(['acme-labs/sentiment-small']);
  });

  it('an unknown event kind is accepted and ignored', async () => {
    const agentId = await agentWithSecrets();
    const body = stripeEvent('invoice.paid', { id: 'in_1', object: 'invoice' });
    const res = await deliver(agentId, 'stripe', body, stripeHeaders(body));
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ received: true });
    expect(await countOf(agentId)).toBe(0);
  });
});

describe('refusals', () => {
  it('a bad signature is 401 unauthenticated, stores nothing, and never shows the expected signature', async () => {
    const agentId = await agentWithSecrets();
    const body = slackEvent({ type: 'channel_created', channel: { id: 'C0009', name: 'launch' } });
    const cases: Array<[string, string, Record<string, string>]> = [
      ['slack', body, slackHeaders(body, { secret: 'wrong' })],
      ['slack', body.replace('launch', 'lunch'), slackHeaders(body)],
      ['slack', body, {}],
      ['linear', linearEvent({ action: 'create', type: 'Team', data: { id: 't', name: 'T' } }), linearHeaders('other body')],
      ['stripe', stripeEvent('customer.created', { id: 'cus_9', name: 'X' }), stripeHeaders('other body')],
      ['huggingface', hubEvent('create', 'repo', { type: 'model', name: 'acme/x' }), hubHeaders('wrong')],
      ['huggingface', hubEvent('create', 'repo', { type: 'model', name: 'acme/x' }), {}],
    ];
    for (const [service, payload, headers] of cases) {
      const res = await deliver(agentId, service, payload, headers);
      expect(res.statusCode, `${service} ${JSON.stringify(headers)}`).toBe(401);
      const error = (res.json() as { error: { code: string; message: string } }).error;
      expect(error.code).toBe('unauthenticated');
      expect(error.message).not.toMatch(/[0-9a-f]{16}/);
      expect(res.body).not.toContain(SECRETS[service as WebhookService]);
    }
    const expected = slackHeaders(body)['x-slack-signature']!;
    expect((await deliver(agentId, 'slack', body, slackHeaders(body, { secret: 'wrong' }))).body).not.toContain(expected.slice(3));
    expect(await countOf(agentId)).toBe(0);
  });

  it('a replayed delivery whose timestamp went stale is 401', async () => {
    const agentId = await agentWithSecrets();
    const body = slackEvent({ type: 'channel_created', channel: { id: 'C0010', name: 'replayed' } });
    const headers = slackHeaders(body);
    expect((await deliver(agentId, 'slack', body, headers)).statusCode).toBe(200);
    await store.remove({ agentId, service: 'slack', type: 'channels' }, ['C0010']);

    clock.now += 6 * 60_000;
    const replay = await deliver(agentId, 'slack', body, headers);
    expect(replay.statusCode).toBe(401);
    expect(replay.json()).toMatchObject({ error: { code: 'unauthenticated', message: expect.stringMatching(/stale or replayed/) } });

    const stripeBody = stripeEvent('customer.created', { id: 'cus_0010', name: 'Replayed' });
    const stripeReplay = await deliver(agentId, 'stripe', stripeBody, stripeHeaders(stripeBody, { timestamp: nowSeconds() - 301 }));
    expect(stripeReplay.statusCode).toBe(401);
    const linearBody = JSON.stringify({ action: 'create', type: 'Team', data: { id: 't', name: 'T' }, webhookTimestamp: clock.now - 61_000 });
    expect((await deliver(agentId, 'linear', linearBody, linearHeaders(linearBody))).statusCode).toBe(401);
    expect(await countOf(agentId)).toBe(0);
  });

  it('an unknown agent, an agent without a webhook secret and one without credentials get one and the same 404', async () => {
    const withSecret = await agentWithSecrets();
    const secretless = await actors.agentWithMembers({ name: 'Secretless' });
    const put = await h.request({ method: 'PUT', url: `/api/agents/${secretless}/services/slack/credentials`, cookie: actors.cookieOf.owner!, payload: { clientId: 'a', clientSecret: 'b' } });
    expect(put.statusCode).toBe(200);
    const bare = await actors.agentWithMembers({ name: 'Bare' });
    const cleared = await h.request({ method: 'PUT', url: `/api/agents/${withSecret}/services/linear/credentials`, cookie: actors.cookieOf.owner!, payload: { clientId: 'a', clientSecret: 'b', clearWebhookSecret: true } });
    expect(cleared.statusCode).toBe(200);

    const body = slackEvent({ type: 'channel_created', channel: { id: 'C0009', name: 'launch' } });
    const answers = [
      await deliver(randomUUID(), 'slack', body, slackHeaders(body)),
      await deliver(secretless, 'slack', body, slackHeaders(body)),
      await deliver(bare, 'slack', body, slackHeaders(body)),
      await deliver(withSecret, 'linear', body, linearHeaders(body)),
    ];
    for (const res of answers) expect(res.statusCode).toBe(404);
    const bodies = answers.map((res) => withoutRequestId(res.json() as { error: Record<string, unknown> }));
    expect(new Set(bodies.map((b) => JSON.stringify(b))).size).toBe(1);
    expect(bodies[0]).toMatchObject({ error: { code: 'not_found' } });
  });

  it('a connector without webhooks, or no connector at all, is 404; a malformed agent id is 400', async () => {
    const agentId = await agentWithSecrets();
    for (const service of ['github', 'sentry', 'nope']) {
      const res = await deliver(agentId, service, '{}', {});
      expect(res.statusCode).toBe(404);
      expect(res.json()).toMatchObject({ error: { code: 'not_found' } });
    }
    const malformed = await deliver('not-a-uuid', 'slack', '{}', {});
    expect(malformed.statusCode).toBe(400);
    expect(malformed.json()).toMatchObject({ error: { code: 'invalid_request', details: { field: 'agentId' } } });
  });

  it('a verified body that is not JSON, or not the shape its event kind needs, is 400 and stores nothing', async () => {
    const agentId = await agentWithSecrets();
    const notJson = 'channel_created=C0009';
    const res = await deliver(agentId, 'slack', notJson, slackHeaders(notJson));
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: { code: 'invalid_request' } });

    const malformed = stripeEvent('product.created', { id: 'prod_x', object: 'product' });
    const shaped = await deliver(agentId, 'stripe', malformed, stripeHeaders(malformed));
    expect(shaped.statusCode).toBe(400);
    expect(shaped.json()).toMatchObject({ error: { code: 'invalid_request', details: { field: 'data.object.name' } } });

    const empty = await h.app.inject({ method: 'POST', url: `/api/webhooks/${agentId}/huggingface`, headers: hubHeaders() });
    expect(empty.statusCode).toBe(400);
    expect(await countOf(agentId)).toBe(0);
  });

  it('takes bodies up to 1 MiB, above the API\'s usual limit, and answers 413 beyond', async () => {
    const agentId = await agentWithSecrets();
    const padding = 'x'.repeat(900_000);
    const large = hubEvent('create', 'repo', { type: 'dataset', name: 'acme/large' }, { padding });
    expect(Buffer.byteLength(large)).toBeLessThan(WEBHOOK_BODY_LIMIT_BYTES);
    expect((await deliver(agentId, 'huggingface', large, hubHeaders())).statusCode).toBe(200);

    const oversized = hubEvent('create', 'repo', { type: 'dataset', name: 'acme/oversized' }, { padding: 'x'.repeat(WEBHOOK_BODY_LIMIT_BYTES) });
    const res = await deliver(agentId, 'huggingface', oversized, hubHeaders());
    expect(res.statusCode).toBe(413);
    expect(res.json()).toMatchObject({ error: { code: 'payload_too_large' } });
    expect((await entitiesOf(agentId, 'huggingface', 'datasets')).map((e) => e.id)).toEqual(['acme/large']);
  });

  it('accepts a body sent without a content type, and leaves JSON parsing of other routes alone', async () => {
    const agentId = await agentWithSecrets();
    const body = hubEvent('create', 'repo', { type: 'space', name: 'acme/bare' });
    const res = await h.app.inject({ method: 'POST', url: `/api/webhooks/${agentId}/huggingface`, payload: Buffer.from(body), headers: hubHeaders() });
    expect(res.statusCode).toBe(200);
    const elsewhere = await h.request({ method: 'POST', url: '/api/agents', cookie: actors.cookieOf.owner!, payload: { name: 'Still JSON' } });
    expect(elsewhere.statusCode).toBe(201);
  });
});

describe('OpenAPI', () => {
  it('documents the route with its path parameters and no session requirement', async () => {
    const doc = (await h.request({ method: 'GET', url: '/api/openapi.json' })).json() as {
      paths: Record<string, Record<string, { tags?: string[]; security?: unknown[]; parameters?: Array<{ name: string; in: string; schema?: { format?: string } }> }>>;
    };
    const post = doc.paths['/api/webhooks/{agentId}/{service}']?.post;
    expect(post).toBeDefined();
    expect(post!.tags).toEqual(['webhooks']);
    expect(post!.security).toEqual([]);
    expect(post!.parameters?.map((p) => [p.name, p.in])).toEqual([['agentId', 'path'], ['service', 'path']]);
    expect(post!.parameters?.[0]?.schema?.format).toBe('uuid');
  });
});
