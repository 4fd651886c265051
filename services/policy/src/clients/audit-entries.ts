import * as grpc from '@grpc/grpc-js';
import { AuditQueryService, channelOptions, type AuditEntryMsg, type QueryRequest, type QueryResponse } from '@portcullis/core';
import { PolicyServiceError } from '../errors.ts';

/** Which entries to read: one agent's, inside an inclusive window, newest first. */
export interface RecentEntriesQuery {
  agentId: string;
  from: Date;
  to: Date;
  limit: number;
}

/** The audit service as the decision point reads it (Simulate only). */
export interface AuditEntrySource {
  /**
   * Up to `limit` entries of the agent in the window, newest first. Rejects with
   * `PolicyServiceError('unavailable')` when the audit service cannot answer.
   */
  recentEntries(query: RecentEntriesQuery): Promise<AuditEntryMsg[]>;
  close(): void;
}

/** The audit service's largest `Query` page (`QUERY_LIMIT_MAX` there); larger limits are clamped. */
export const AUDIT_QUERY_PAGE_MAX = 500;

/**
 * A client of `portcullis.audit.v1.AuditQuery` at `address`. Reads through `Query`, page by
 * page (500 entries each), newest first. (`Export` answers in the same order since decision
 * 071 and could stream the whole window at once.) The channel connects on first use, so the
 * audit service may start after the decision point.
 */
export function createAuditEntrySource(address: string, options: { timeoutMs?: number } = {}): AuditEntrySource {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const client = new AuditQueryService(address, grpc.credentials.createInsecure(), channelOptions);
  const query = (request: QueryRequest) =>
    new Promise<QueryResponse>((resolve, reject) => {
      client.Query!(request, { deadline: Date.now() + timeoutMs }, (err: grpc.ServiceError | null, response: QueryResponse) => {
        if (err) reject(err);
        else resolve(response);
      });
    });

  return {
    async recentEntries({ agentId, from, to, limit }) {
      const entries: AuditEntryMsg[] = [];
      const seen = new Set<string>();
      // `to` is fixed for every page, so entries written meanwhile do not shift the pages;
      // late deliveries inside the window still can, hence the de-duplication by id.
      const filter = { agentIds: [agentId], from: from.toISOString(), to: to.toISOString(), agent: '', service: '', tool: '', result: '', member: '', policy: '' };
      for (let offset = 0; entries.length < limit;) {
        const pageSize = Math.min(AUDIT_QUERY_PAGE_MAX, limit - entries.length);
        let page: QueryResponse;
        try {
          page = await query({ filter, limit: pageSize, offset });
        } catch (err) {
          throw auditFailure(address, err);
        }
        for (const entry of page.entries) {
          if (seen.has(entry.id) || entries.length >= limit) continue;
          seen.add(entry.id);
          entries.push(entry);
        }
        offset += page.entries.length;
        if (page.entries.length < pageSize) break;
      }
      return entries;
    },
    close: () => client.close(),
  };
}

function auditFailure(address: string, err: unknown): PolicyServiceError {
  const detail = err instanceof Error && 'code' in err ? `${grpc.status[(err as grpc.ServiceError).code] ?? 'error'}: ${(err as grpc.ServiceError).details}` : String(err);
  return new PolicyServiceError('unavailable', `The audit service at ${address} cannot be read (${detail}); Simulate needs it to replay past calls`, { cause: err });
}
