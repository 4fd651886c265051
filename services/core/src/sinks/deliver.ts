import { randomUUID } from 'node:crypto';
import { OutboundError, sendOutbound, type OutboundAnswer, type OutboundRule } from '../net/outbound-request.ts';
import { otlpLogsBody } from './otlp-logs.ts';
import type { SinkEntry } from './sink-entry.ts';
import { otlpLogsUrl } from './sink-url.ts';
import { SINK_SIGNATURE_HEADER, signSinkBody } from './webhook-signature.ts';

/** A sink with its secrets opened: what a delivery needs. */
export type SinkTarget =
  | { kind: 'webhook'; id: string; url: string; secret: string }
  | { kind: 'otlp'; id: string; url: string; headers: Record<string, string> };

/**
 * A delivery that did not succeed. The message names the HTTP status or the class of network
 * failure (`could not reach the sink: connection refused`, `destination not allowed: …`), never
 * a secret, and never what the sink answered unless the operator listed it in SINK_ALLOWED_HOSTS.
 */
export class SinkDeliveryError extends Error {
  override name = 'SinkDeliveryError';
}

/** The webhook request body: the sink's id and the entries, oldest first. */
export interface WebhookSinkBody {
  sinkId: string;
  /** One request's id (each retry of a batch is a new delivery; entries keep their ids). */
  deliveryId: string;
  /** True only for the dashboard's "Send test" request. */
  test?: true;
  entries: SinkEntry[];
}

const USER_AGENT = 'Portcullis-Audit-Sink/1';
const DEFAULT_TIMEOUT_MS = 10_000;

/**
 * Sends `entries` to the sink once under the outbound destination rule (decision 058: the URL
 * is checked again now — its name may resolve elsewhere than when the sink was created — and
 * the connection goes to the checked addresses only): resolves when it answered 2xx, throws
 * `SinkDeliveryError` otherwise (non-2xx, a redirect — never followed, so a sink cannot bounce
 * us elsewhere —, a refused destination, a timeout or a network error). Retrying is the caller's business.
 */
export async function deliverToSink(target: SinkTarget, entries: readonly SinkEntry[], rule: OutboundRule, options: { timeoutMs?: number; test?: boolean } = {}): Promise<void> {
  const request = target.kind === 'webhook' ? webhookRequest(target, entries, options.test === true) : otlpRequest(target, entries);
  let answer: OutboundAnswer;
  try {
    answer = await sendOutbound(request.url, {
      method: 'POST',
      headers: { 'user-agent': USER_AGENT, ...request.headers },
      body: request.body,
      timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    }, rule);
  } catch (err) {
    if (!(err instanceof OutboundError)) throw err;
    throw new SinkDeliveryError(err.failure === 'destination not allowed' ? `destination not allowed: the sink's URL ${err.message}` : `could not reach the sink: ${err.failure}`);
  }
  if (answer.status >= 200 && answer.status < 300) return;
  const what = answer.status >= 300 && answer.status < 400 ? `answered HTTP ${answer.status} (redirects are not followed)` : `answered HTTP ${answer.status}`;
  throw new SinkDeliveryError(`the sink ${what}${answer.excerpt ? `: ${answer.excerpt}` : ''}`);
}

function webhookRequest(target: Extract<SinkTarget, { kind: 'webhook' }>, entries: readonly SinkEntry[], test: boolean) {
  const payload: WebhookSinkBody = { sinkId: target.id, deliveryId: randomUUID(), ...(test ? { test: true as const } : {}), entries: [...entries] };
  const body = JSON.stringify(payload);
  return {
    url: target.url,
    body,
    headers: { 'content-type': 'application/json', [SINK_SIGNATURE_HEADER]: signSinkBody(target.secret, body) },
  };
}

function otlpRequest(target: Extract<SinkTarget, { kind: 'otlp' }>, entries: readonly SinkEntry[]) {
  // The owner's headers first: content-type is ours.
  return { url: otlpLogsUrl(target.url), body: otlpLogsBody(entries), headers: { ...target.headers, 'content-type': 'application/json' } };
}
