import { z } from 'zod';
import { definedAttributes, parsePayload, payloadText, providerId } from './webhook-payload.ts';
import { constantTimeEqual, hmacSha256Hex, refused, singleHeader, unixSecondsOf, VERIFIED, withinWindow } from './webhook-signing.ts';
import type { EntityChange, StoredEntities, WebhookOutcome, WebhookProvider } from './webhook-types.ts';

/** Stripe's libraries refuse a signature timestamp older than five minutes by default. */
const TOLERANCE_SECONDS = 5 * 60;

const envelope = z.object({ type: payloadText });
const eventOf = <T extends z.ZodType>(object: T) => z.object({ data: z.object({ object }) });

/** An expandable field: the id, or the expanded object. */
const expandable = z.union([providerId, z.object({ id: providerId })]);
const idOf = (value: z.infer<typeof expandable>) => (typeof value === 'string' ? value : value.id);

const deletedObject = eventOf(z.object({ id: providerId }));
const customerObject = eventOf(z.object({ id: providerId, name: payloadText.nullish(), email: payloadText.nullish() }));
const productObject = eventOf(z.object({ id: providerId, name: payloadText.min(1), active: z.boolean().nullish() }));
const subscriptionObject = eventOf(z.object({
  id: providerId,
  customer: expandable,
  status: payloadText.nullish(),
  items: z.object({ data: z.array(z.object({ price: z.object({ product: expandable }).nullish() })) }).nullish(),
}));
const accountObject = eventOf(z.object({
  id: providerId,
  email: payloadText.nullish(),
  country: payloadText.nullish(),
  business_profile: z.object({ name: payloadText.nullish() }).nullish(),
  settings: z.object({ dashboard: z.object({ display_name: payloadText.nullish() }).nullish() }).nullish(),
}));

/** `t=<unix>,v1=<hex>[,v1=<hex>…][,v0=…]`; only the `v1` scheme is HMAC-SHA256. */
function parseSignatureHeader(header: string): { timestampText?: string; signatures: string[] } {
  const timestamps: string[] = [];
  const signatures: string[] = [];
  for (const item of header.split(',')) {
    const at = item.indexOf('=');
    if (at < 0) continue;
    const key = item.slice(0, at).trim();
    const value = item.slice(at + 1).trim();
    if (key === 't') timestamps.push(value);
    else if (key === 'v1' && value !== '') signatures.push(value);
  }
  return { ...(timestamps.length === 1 ? { timestampText: timestamps[0] } : {}), signatures };
}

/**
 * Stripe objects have no single display name: a subscription is shown as "<customer>:
 * <products>", named from the harvested customers and products (their ids when not harvested).
 */
async function subscriptionChange(payload: unknown, stored: StoredEntities): Promise<EntityChange> {
  const subscription = parsePayload(subscriptionObject, payload, 'Stripe').data.object;
  const customerId = idOf(subscription.customer);
  const productIds = [...new Set((subscription.items?.data ?? []).flatMap((item) => (item.price ? [idOf(item.price.product)] : [])))];
  const [customers, products] = await Promise.all([stored.get('customers', [customerId]), stored.get('products', productIds)]);
  const customerName = customers.get(customerId)?.name ?? customerId;
  const productNames = productIds.map((id) => products.get(id)?.name ?? id);
  return {
    op: 'upsert',
    type: 'subscriptions',
    entities: [{
      id: subscription.id,
      name: productNames.length > 0 ? `${customerName}: ${productNames.join(', ')}` : customerName,
      attributes: definedAttributes({ customer: customerId, status: subscription.status ?? undefined }),
    }],
  };
}

function removal(payload: unknown, type: string): EntityChange {
  return { op: 'remove', type, ids: [parsePayload(deletedObject, payload, 'Stripe').data.object.id] };
}

async function changeOf(type: string, payload: unknown, stored: StoredEntities): Promise<EntityChange | undefined> {
  switch (type) {
    case 'customer.created':
    case 'customer.updated': {
      const { id, name, email } = parsePayload(customerObject, payload, 'Stripe').data.object;
      // Named as the harvest names them; the e-mail is not kept as an attribute (nor by the harvest).
      return { op: 'upsert', type: 'customers', entities: [{ id, name: name || email || id, attributes: {} }] };
    }
    case 'customer.deleted':
      return removal(payload, 'customers');
    case 'product.created':
    case 'product.updated': {
      const { id, name, active } = parsePayload(productObject, payload, 'Stripe').data.object;
      return { op: 'upsert', type: 'products', entities: [{ id, name, attributes: definedAttributes({ active: active ?? undefined }) }] };
    }
    case 'product.deleted':
      return removal(payload, 'products');
    case 'customer.subscription.created':
    case 'customer.subscription.updated':
    case 'customer.subscription.paused':
    case 'customer.subscription.resumed':
      return subscriptionChange(payload, stored);
    case 'customer.subscription.deleted':
      // Sent when a subscription ends; Stripe's subscription list leaves out ended ones, so does the harvest.
      return removal(payload, 'subscriptions');
    case 'account.updated': {
      const account = parsePayload(accountObject, payload, 'Stripe').data.object;
      const name = account.settings?.dashboard?.display_name || account.business_profile?.name || account.email || account.id;
      return { op: 'upsert', type: 'accounts', entities: [{ id: account.id, name, attributes: definedAttributes({ country: account.country ?? undefined }) }] };
    }
    default:
      return undefined;
  }
}

/**
 * Stripe. Signature: `Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256(endpoint secret,
 * t + "." + raw body)>`, possibly several `v1` (any may match), `t` within five minutes.
 */
export const stripeWebhook: WebhookProvider = {
  verify({ rawBody, headers, secret, nowMs }) {
    const header = singleHeader(headers, 'stripe-signature');
    if (header === undefined) return refused('The request is not signed: the Stripe-Signature header is required.');
    const { timestampText, signatures } = parseSignatureHeader(header);
    const timestamp = unixSecondsOf(timestampText);
    if (timestampText === undefined || timestamp === undefined || signatures.length === 0) {
      return refused('The Stripe-Signature header needs one t=<unix time> and at least one v1=<signature>.');
    }
    if (!withinWindow(timestamp, nowMs, TOLERANCE_SECONDS)) {
      return refused('The signature timestamp is more than 5 minutes away from our clock: a stale or replayed request.');
    }
    const expected = hmacSha256Hex(secret, `${timestampText}.`, rawBody);
    // While an endpoint secret is being rolled Stripe signs with each live secret: any one may match.
    return signatures.some((signature) => constantTimeEqual(signature, expected))
      ? VERIFIED
      : refused('No v1 signature matches the body and this agent\'s Stripe endpoint secret.');
  },

  async interpret(payload, stored): Promise<WebhookOutcome> {
    const { type } = parsePayload(envelope, payload, 'Stripe');
    const change = await changeOf(type, payload, stored);
    return change ? { kind: 'changes', event: type, changes: [change] } : { kind: 'ignored', event: type };
  },
};
