import type { HistogramRequest, HistogramResponse } from '@portcullis/core';
import type { AuditStore } from '../store/audit-store.ts';
import { parseHistogramRequest } from './parse-request.ts';

/**
 * `Histogram`: entries and denies per time bucket over exactly `Query`'s filter and redaction,
 * so the buckets add up to `Query`'s `total` (decision 037).
 */
export async function handleHistogram(deps: { store: Pick<AuditStore, 'histogram'> }, request: HistogramRequest): Promise<HistogramResponse> {
  return deps.store.histogram(parseHistogramRequest(request));
}
