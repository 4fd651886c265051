import type { auditSinks } from '../db/schema/audit-sinks.ts';
import { openWithSecret, sealWithSecret } from '../secret-box.ts';
import type { SinkTarget } from './deliver.ts';

type SinkRow = Pick<typeof auditSinks.$inferSelect, 'id' | 'kind' | 'url' | 'secretSealed' | 'headersSealed'>;

/** Secret-box labels of a sink's secrets: a value sealed for one cannot be opened as another. */
const WEBHOOK_SECRET_LABEL = 'audit-sink-webhook-secret';
const OTLP_HEADERS_LABEL = 'audit-sink-otlp-headers';

export const sealSinkSecret = (serverSecret: string, secret: string) => sealWithSecret(serverSecret, WEBHOOK_SECRET_LABEL, secret);
export const sealSinkHeaders = (serverSecret: string, headers: Record<string, string>) => sealWithSecret(serverSecret, OTLP_HEADERS_LABEL, JSON.stringify(headers));

/** The names of a sink's OTLP headers (shown in the list; the values never are). */
export function sinkHeaderNames(serverSecret: string, headersSealed: string | null): string[] {
  return headersSealed ? Object.keys(openHeaders(serverSecret, headersSealed)) : [];
}

/** A stored sink with its secrets opened, ready for `deliverToSink`. */
export function sinkTargetOf(serverSecret: string, row: SinkRow): SinkTarget {
  if (row.kind === 'webhook') {
    if (!row.secretSealed) throw new Error(`sink ${row.id} has no secret`);
    return { kind: 'webhook', id: row.id, url: row.url, secret: openWithSecret(serverSecret, WEBHOOK_SECRET_LABEL, row.secretSealed) };
  }
  return { kind: 'otlp', id: row.id, url: row.url, headers: row.headersSealed ? openHeaders(serverSecret, row.headersSealed) : {} };
}

function openHeaders(serverSecret: string, sealed: string): Record<string, string> {
  return JSON.parse(openWithSecret(serverSecret, OTLP_HEADERS_LABEL, sealed)) as Record<string, string>;
}
