import { ApiError, call, http, query } from './client.ts';
import type { AuditMember, AuditPage } from './types.ts';

/** The filters of GET /api/audit (the spec's table), shared by the stream and the export. */
export interface AuditFilters {
  from?: string;
  to?: string;
  /** Case-insensitive substring of the agent name (the spec's `agent`). */
  agent?: string;
  /** Exact agent id (decision 045): what the explorer's agent dropdown sends. */
  agentId?: string;
  service?: string;
  tool?: string;
  result?: 'ALLOW' | 'DENY';
  member?: string;
  policy?: string;
}

export const FILTER_KEYS = ['from', 'to', 'agent', 'agentId', 'service', 'tool', 'result', 'member', 'policy'] as const satisfies ReadonlyArray<keyof AuditFilters>;

/** The page size the audit page uses when the URL names none (the API's own default is 500). */
export const DEFAULT_LIMIT = 50;
export const LIMITS = [25, 50, 100, 200, 500] as const;

/** What the audit page shows: the filters plus paging, all of it read from / written to the URL. */
export interface AuditView { filters: AuditFilters; limit: number; offset: number }

function positiveInt(text: string | null, fallback: number, max = Number.MAX_SAFE_INTEGER): number {
  const n = Number(text);
  return text !== null && Number.isInteger(n) && n >= 0 ? Math.min(n, max) : fallback;
}

/** The view a URL's query describes; unknown or empty parameters are left out. */
export function viewFromQuery(params: URLSearchParams): AuditView {
  const filters: AuditFilters = {};
  for (const key of FILTER_KEYS) {
    const value = params.get(key)?.trim();
    if (!value) continue;
    if (key === 'result') { if (value === 'ALLOW' || value === 'DENY') filters.result = value; }
    else filters[key] = value;
  }
  const limit = positiveInt(params.get('limit'), DEFAULT_LIMIT, 500) || DEFAULT_LIMIT;
  return { filters, limit, offset: positiveInt(params.get('offset'), 0) };
}

/** The URL query of a view (defaults left out, so a plain `/audit` stays plain). */
export function queryOfView(view: AuditView): string {
  const params = filterParams(view.filters);
  if (view.limit !== DEFAULT_LIMIT) params.set('limit', String(view.limit));
  if (view.offset > 0) params.set('offset', String(view.offset));
  return params.toString();
}

/** The filters as query parameters (set ones only). */
export function filterParams(filters: AuditFilters): URLSearchParams {
  const params = new URLSearchParams();
  for (const key of FILTER_KEYS) {
    const value = filters[key];
    if (value) params.set(key, value);
  }
  return params;
}

export function listAudit(view: AuditView): Promise<AuditPage> {
  return call(http.GET('/api/audit', { params: { query: query({ ...view.filters, limit: view.limit, offset: view.offset }) } }));
}

/** The newest audited call of one member on one agent, and how many there are (the setup page's first-call check). */
export function memberCalls(agentId: string, memberId: string): Promise<AuditPage> {
  return call(http.GET('/api/audit', { params: { query: { agentId, member: memberId, limit: 1 } } }));
}

export async function listAuditMembers(): Promise<AuditMember[]> {
  return (await call(http.GET('/api/audit/members'))).members;
}

/**
 * The live stream's URL: GET /api/audit's filters only — the stream has no pages and refuses
 * `limit` / `offset` (decision 015).
 */
export function auditStreamUrl(filters: AuditFilters): string {
  const query = filterParams(filters).toString();
  return query ? `/api/audit/stream?${query}` : '/api/audit/stream';
}

/** The `data` of the stream's `event: end`. */
export interface StreamEnd { reason: 'overflow' | 'session_ended' | 'shutdown' | string; message: string }

export type ExportFormat = 'csv' | 'ndjson';
export interface ExportProgress { bytes: number; rows: number }
export interface ExportedFile { blob: Blob; filename: string; bytes: number; rows: number }

/**
 * Counts records in a CSV or NDJSON body as it arrives: line ends outside quoted CSV fields
 * (a reason may hold a newline inside quotes). Chunks may split anywhere, so the quote state
 * carries over.
 */
export class RecordCounter {
  private inQuotes = false;
  private sawText = false;
  lines = 0;
  constructor(private readonly format: ExportFormat) {}

  push(text: string): void {
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c === 34 /* " */ && this.format === 'csv') this.inQuotes = !this.inQuotes;
      else if (c === 10 /* \n */ && !this.inQuotes) { this.lines++; this.sawText = false; continue; }
      if (c !== 13) this.sawText = true;
    }
  }

  /** Data rows so far: records, less the CSV header, plus a last line without its newline. */
  rows(final = false): number {
    const records = this.lines + (final && this.sawText ? 1 : 0);
    return Math.max(0, this.format === 'csv' ? records - 1 : records);
  }
}

function filenameOf(disposition: string | null, format: ExportFormat): string {
  const match = disposition && /filename="?([^";]+)"?/i.exec(disposition);
  return match?.[1] ?? `portcullis-audit.${format}`;
}

/**
 * Streams GET /api/audit/export?exportAll=true with the filters, reporting bytes and rows as
 * they arrive, and answers the whole file as a Blob. `signal` cancels it (the gateway then
 * cancels the store query too). An error before the body is the API's error, as an `ApiError`.
 */
export async function exportAudit(filters: AuditFilters, format: ExportFormat, options: { signal: AbortSignal; onProgress: (p: ExportProgress) => void }): Promise<ExportedFile> {
  const params = filterParams(filters);
  params.set('exportAll', 'true');
  params.set('format', format);
  let res: Response;
  try {
    res = await fetch(`/api/audit/export?${params}`, { credentials: 'same-origin', signal: options.signal });
  } catch (err) {
    if (options.signal.aborted) throw err;
    throw new ApiError(0, 'network', 'The server could not be reached. Check your connection and try again.');
  }
  if (!res.ok) {
    const body = await res.json().catch(() => undefined) as { error?: { code?: string; message?: string; details?: Record<string, unknown> } } | undefined;
    throw new ApiError(res.status, body?.error?.code ?? 'http_error', body?.error?.message ?? `The server answered ${res.status}.`, body?.error?.details);
  }
  // The Blob's own parameter type: the DOM's BlobPart in the browser, Node's in the unit tests' type-check.
  const chunks: NonNullable<ConstructorParameters<typeof Blob>[0]> = [];
  const counter = new RecordCounter(format);
  const decoder = new TextDecoder();
  let bytes = 0;
  if (res.body) {
    const reader = res.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      bytes += value.byteLength;
      counter.push(decoder.decode(value, { stream: true }));
      options.onProgress({ bytes, rows: counter.rows() });
    }
  }
  counter.push(decoder.decode());
  const rows = counter.rows(true);
  options.onProgress({ bytes, rows });
  const type = format === 'csv' ? 'text/csv;charset=utf-8' : 'application/x-ndjson';
  return { blob: new Blob(chunks, { type }), filename: filenameOf(res.headers.get('content-disposition'), format), bytes, rows };
}

/** `1.2 KB` and the like, for progress displays. */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

