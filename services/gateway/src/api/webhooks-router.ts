import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Database } from '@portcullis/core';
import { createWebhookService } from '../modules/webhooks/webhook-service.ts';

/** Provider events are usually kilobytes; this leaves room for large Stripe objects. Larger is 413. */
export const WEBHOOK_BODY_LIMIT_BYTES = 1_048_576;

const webhookParams = z.strictObject({
  agentId: z.string().uuid('must be a UUID').describe('The agent whose owner set the webhook secret'),
  service: z.string().describe('slack, linear, stripe or huggingface; any other connector is 404'),
});

const webhookAnswer = z.union([
  z.object({ received: z.literal(true) }),
  z.object({ challenge: z.string() }).describe('Slack url_verification only'),
]);

/**
 * `POST /api/webhooks/:agentId/:service`: providers call it, so no session; the provider's
 * signature under the agent's webhook secret is the authentication (decision 009).
 * Registered as an encapsulated plugin: its content-type parser hands every body over as raw
 * bytes (signatures are over those bytes) without changing how other routes parse JSON.
 */
export async function webhooksRoutes(fastify: FastifyInstance, options: { db: Database; secret: string; now?: () => number }) {
  const app = fastify.withTypeProvider<ZodTypeProvider>();
  const webhooks = createWebhookService(options);

  fastify.removeAllContentTypeParsers();
  fastify.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: WEBHOOK_BODY_LIMIT_BYTES }, (_request, body, done) => done(null, body));

  app.post('/api/webhooks/:agentId/:service', {
    schema: {
      tags: ['webhooks'],
      summary: 'Inbound webhook of a provider (Slack, Linear, Stripe, Hugging Face); refreshes harvested entities',
      description: 'No session: the provider signs the raw body with the agent\'s webhook secret (PUT …/services/:service/credentials). '
        + '401 when the signature, the secret or the timestamp window does not check out; 404 for another connector, an unknown agent '
        + `or no webhook secret (one answer); unknown event kinds are accepted and ignored. Body up to ${WEBHOOK_BODY_LIMIT_BYTES} bytes.`,
      security: [],
      params: webhookParams,
      response: { 200: webhookAnswer },
    },
  }, async (request) => webhooks.receive({
    agentId: request.params.agentId,
    service: request.params.service,
    rawBody: Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0),
    headers: request.headers,
  }, request.log));
}
