import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { stripeWebhook } from './stripe-webhook.ts';
import type { StoredEntities, StoredEntity } from './webhook-types.ts';

const SECRET = 'whsec_0123456789abcdefghijklmnopqrstuv';
const NOW_MS = 1_760_000_000_000;
const NOW_S = NOW_MS / 1000;

/** Signs as Stripe documents it: v1 = hex(HMAC-SHA256(endpoint secret, t + "." + raw body)). */
const v1 = (body: string, t: number, secret = SECRET) => createHmac('sha256', secret).update(`${t}.${body}`).digest('hex');

const verify = (body: string, header: string | undefined, nowMs = NOW_MS) =>
  stripeWebhook.verify({ rawBody: Buffer.from(body), headers: header === undefined ? {} : { 'stripe-signature': header }, secret: SECRET, nowMs });

const stripeEvent = (type: string, object: Record<string, unknown>) => ({
  id: 'evt_1', object: 'event', api_version: '2025-09-30', created: NOW_S, livemode: false, pending_webhooks: 1, type, data: { object },
});

function storedOf(byType: Record<string, Record<string, string>>): StoredEntities {
  return {
    async get(type, ids) {
      const names = byType[type] ?? {};
      return new Map(ids.filter((id) => names[id] !== undefined).map((id): [string, StoredEntity] => [id, { name: names[id]!, attributes: {} }]));
    },
  };
}
const nothingStored = storedOf({});

describe('stripe verify', () => {
  const body = JSON.stringify(stripeEvent('customer.created', { id: 'cus_0003', object: 'customer', name: 'Carol Poe' }));

  it('accepts t and a v1 computed over "t.body"', () => {
    expect(verify(body, `t=${NOW_S},v1=${v1(body, NOW_S)}`)).toEqual({ ok: true });
  });

  it('accepts when any one of several v1 matches (a rolled secret), and ignores v0', () => {
    const header = `t=${NOW_S},v1=${v1(body, NOW_S, 'whsec_old')},v1=${v1(body, NOW_S)},v0=${'0'.repeat(64)}`;
    expect(verify(body, header)).toEqual({ ok: true });
    expect(verify(body, `t=${NOW_S},v1=${v1(body, NOW_S, 'whsec_old')},v1=${v1(body, NOW_S, 'whsec_older')}`).ok).toBe(false);
  });

  it('refuses a tampered body, another secret, or a signature over another timestamp', () => {
    expect(verify(body.replace('Carol', 'Karol'), `t=${NOW_S},v1=${v1(body, NOW_S)}`).ok).toBe(false);
    expect(verify(body, `t=${NOW_S},v1=${v1(body, NOW_S, 'whsec_other')}`)).toMatchObject({ ok: false, failure: expect.stringMatching(/No v1 signature matches/) });
    expect(verify(body, `t=${NOW_S - 10},v1=${v1(body, NOW_S)}`).ok).toBe(false);
  });

  it('refuses a timestamp outside five minutes, though correctly signed', () => {
    const old = NOW_S - 301;
    expect(verify(body, `t=${old},v1=${v1(body, old)}`)).toMatchObject({ ok: false, failure: expect.stringMatching(/5 minutes/) });
    const ahead = NOW_S + 301;
    expect(verify(body, `t=${ahead},v1=${v1(body, ahead)}`).ok).toBe(false);
    const recent = NOW_S - 299;
    expect(verify(body, `t=${recent},v1=${v1(body, recent)}`).ok).toBe(true);
  });

  it('refuses a missing or incomplete header', () => {
    expect(verify(body, undefined)).toMatchObject({ ok: false, failure: expect.stringMatching(/Stripe-Signature header is required/) });
    expect(verify(body, `v1=${v1(body, NOW_S)}`)).toMatchObject({ ok: false, failure: expect.stringMatching(/t=<unix time>/) });
    expect(verify(body, `t=${NOW_S}`).ok).toBe(false);
    expect(verify(body, `t=${NOW_S},v0=${v1(body, NOW_S)}`).ok).toBe(false);
    expect(verify(body, `t=soon,v1=${v1(body, NOW_S)}`).ok).toBe(false);
    expect(verify(body, `t=${NOW_S},t=${NOW_S},v1=${v1(body, NOW_S)}`).ok).toBe(false);
  });
});

describe('stripe interpret', () => {
  const interpret = (type: string, object: Record<string, unknown>, stored = nothingStored) => stripeWebhook.interpret(stripeEvent(type, object), stored);

  it('upserts customers by name, else e-mail, and removes deleted ones', async () => {
    expect(await interpret('customer.updated', { id: 'cus_0001', object: 'customer', name: 'Alice Smith', email: 'alice@example.com' })).toEqual({
      kind: 'changes', event: 'customer.updated',
      changes: [{ op: 'upsert', type: 'customers', entities: [{ id: 'cus_0001', name: 'Alice Smith', attributes: {} }] }],
    });
    expect(await interpret('customer.created', { id: 'cus_0009', object: 'customer', name: null, email: 'nameless@example.com' })).toMatchObject({
      changes: [{ entities: [{ id: 'cus_0009', name: 'nameless@example.com' }] }],
    });
    expect(await interpret('customer.deleted', { id: 'cus_0002', object: 'customer', deleted: true })).toMatchObject({
      changes: [{ op: 'remove', type: 'customers', ids: ['cus_0002'] }],
    });
  });

  it('upserts and removes products', async () => {
    expect(await interpret('product.updated', { id: 'prod_0001', object: 'product', name: 'Pro plan (2025)', active: false })).toMatchObject({
      changes: [{ op: 'upsert', type: 'products', entities: [{ id: 'prod_0001', name: 'Pro plan (2025)', attributes: { active: false } }] }],
    });
    expect(await interpret('product.deleted', { id: 'prod_0002', object: 'product' })).toMatchObject({ changes: [{ op: 'remove', type: 'products', ids: ['prod_0002'] }] });
  });

  it('names a subscription "<customer>: <products>" from the stored customers and products, else their ids', async () => {
    const subscription = {
      id: 'sub_0003', object: 'subscription', customer: 'cus_0001', status: 'trialing',
      items: { object: 'list', data: [{ id: 'si_1', price: { id: 'price_1', product: 'prod_0001' } }, { id: 'si_2', price: { id: 'price_2', product: { id: 'prod_0009' } } }] },
    };
    const stored = storedOf({ customers: { cus_0001: 'Alice Doe' }, products: { prod_0001: 'Pro plan' } });
    expect(await interpret('customer.subscription.created', subscription, stored)).toEqual({
      kind: 'changes', event: 'customer.subscription.created',
      changes: [{ op: 'upsert', type: 'subscriptions', entities: [{ id: 'sub_0003', name: 'Alice Doe: Pro plan, prod_0009', attributes: { customer: 'cus_0001', status: 'trialing' } }] }],
    });
    expect(await interpret('customer.subscription.updated', { ...subscription, customer: { id: 'cus_0404' }, items: { data: [] } })).toMatchObject({
      changes: [{ entities: [{ id: 'sub_0003', name: 'cus_0404', attributes: { customer: 'cus_0404' } }] }],
    });
    expect(await interpret('customer.subscription.deleted', { ...subscription, status: 'canceled' })).toMatchObject({
      changes: [{ op: 'remove', type: 'subscriptions', ids: ['sub_0003'] }],
    });
  });

  it('upserts the account under its dashboard display name', async () => {
    expect(await interpret('account.updated', { id: 'acct_0001', object: 'account', country: 'US', email: 'ops@acme.test', business_profile: { name: 'Acme' }, settings: { dashboard: { display_name: 'Acme Inc.' } } })).toEqual({
      kind: 'changes', event: 'account.updated',
      changes: [{ op: 'upsert', type: 'accounts', entities: [{ id: 'acct_0001', name: 'Acme Inc.', attributes: { country: 'US' } }] }],
    });
  });

  it('ignores other event types', async () => {
    expect(await interpret('invoice.paid', { id: 'in_1', object: 'invoice' })).toEqual({ kind: 'ignored', event: 'invoice.paid' });
    expect(await stripeWebhook.interpret({ type: 'charge.refunded' }, nothingStored)).toEqual({ kind: 'ignored', event: 'charge.refunded' });
  });

  it('refuses a known type with a malformed object', async () => {
    await expect(interpret('product.created', { id: 'prod_x', object: 'product' })).rejects.toMatchObject({ code: 'invalid_request', details: { field: 'data.object.name' } });
    await expect(stripeWebhook.interpret({ type: 'customer.created', data: {} }, nothingStored)).rejects.toMatchObject({ code: 'invalid_request', details: { field: 'data.object' } });
    await expect(stripeWebhook.interpret({ data: {} }, nothingStored)).rejects.toMatchObject({ code: 'invalid_request', details: { field: 'type' } });
  });
});
