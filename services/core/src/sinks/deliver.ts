import { randomUUID } from 'node:crypto';
import { otlpLogsBody } from './otlp-logs.ts';
import type { SinkEntry } from './sink-entry.ts';
import { otlpLogsUrl } from './sink-url.ts';
import { SINK_SIGNATURE_HEADER, signSinkBody } from './webhook-signature.ts';

/** A sink with its secrets opened: what a delivery needs. */
export type SinkTarget =
  | { kind: 'webhook'; id: string; url: string; secret: string }
  | { kind: 'otlp'; id: string; url: string; headers: Record<string, string> };

/** A delivery that did not succeed; the message names the status or network error, never a secret. */
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
 * Sends `entries` to the sink once: resolves when it answered 2xx, throws `SinkDeliveryError`
 * otherwise (non-2xx, a redirect — never followed, so a sink cannot bounce us elsewhere —,
 * a timeout or a network error). Retrying is the caller's business.
 */
export async function deliverToSink(target: SinkTarget, entries: readonly SinkEntry[], options: { timeoutMs?: number; test?: boolean } = {}): Promise<void> {
  const request = target.kind === 'webhook' ? webhookRequest(target, entries, options.test === true) : otlpRequest(target, entries);
  let response: Response;
  try {
    response = await fetch(request.url, {
      method: 'POST',
      headers: { 'user-agent': USER_AGENT, ...request.headers },
      body: request.body,
      redirect: 'manual',
      signal: AbortSignal.timeout(options.timeoutMs ?? DEFAULT_TIMEOUT_MS),
    });
  } catch (err) {
    throw new SinkDeliveryError(`could not reach the sink: ${networkReason(err)}`);
  }
  const text = await response.text().catch(() => '');
  if (response.status >= 200 && response.status < 300) return;
  const excerpt = text.replace(/\s+/g, ' ').trim().slice(0, 200);
  const what = response.status >= 300 && response.status < 400 ? 'redirected (redirects are not followed)' : `answered HTTP ${response.status}`;
  throw new SinkDeliveryError(`the sink ${what}${excerpt ? `: ${excerpt}` : ''}`);
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

function networkReason(err: unknown): string {
  if (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError')) return 'no answer in time';
  const cause = err instanceof Error ? (err.cause as { code?: string; message?: string } | undefined) : undefined;
  return cause?.code ?? cause?.message ?? (err instanceof Error ? err.message : String(err));
}
