import * as grpc from '@grpc/grpc-js';
import { AuditStoreUnavailableError } from '../store/clickhouse-connection.ts';
import { InvalidArgumentError } from './parse-request.ts';

/** Where handlers report failures that are not the caller's fault. */
export type AuditLogger = (message: string, error?: unknown) => void;

const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND', 'EPIPE', 'ECONNABORTED']);

/**
 * The one place errors become gRPC statuses:
 * - `InvalidArgumentError` → INVALID_ARGUMENT with its message (the caller can fix it);
 * - the store not answering → UNAVAILABLE (a retry may help);
 * - anything else → INTERNAL with a fixed message; the cause is logged, never sent, so no
 *   SQL or driver text reaches a caller.
 */
export function toServiceError(err: unknown, log: AuditLogger, rpc: string): Partial<grpc.StatusObject> & { code: grpc.status; details: string } {
  if (err instanceof InvalidArgumentError) return { code: grpc.status.INVALID_ARGUMENT, details: err.message };
  if (isUnavailable(err)) {
    log(`audit ${rpc}: store unavailable`, err);
    return { code: grpc.status.UNAVAILABLE, details: 'audit store unavailable' };
  }
  log(`audit ${rpc} failed`, err);
  return { code: grpc.status.INTERNAL, details: `audit ${rpc} failed` };
}

function isUnavailable(err: unknown): boolean {
  if (err instanceof AuditStoreUnavailableError) return true;
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && NETWORK_CODES.has(code);
}
