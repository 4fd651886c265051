import type { QueryRequest, QueryResponse } from '@portcullis/core';
import type { AuditStore } from '../store/audit-store.ts';
import { toAuditEntryMsg } from '@portcullis/core';
import { parseQueryRequest } from './parse-request.ts';

/** `Query`: one page of matching entries, newest first, with the count of all matches. */
export async function handleQuery(deps: { store: Pick<AuditStore, 'query'> }, request: QueryRequest): Promise<QueryResponse> {
  const { filter, page } = parseQueryRequest(request);
  const { entries, total } = await deps.store.query(filter, page);
  return { entries: entries.map(toAuditEntryMsg), total };
}
