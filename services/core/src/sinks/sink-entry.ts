import type { AuditEntry } from '../audit-entry.ts';

/**
 * An audit entry as a sink receives it: the shape `GET /api/audit` shows the agent's owner
 * (arguments already redacted at publish time, policy identities kept: sinks are the owner's,
 * `user` beside `memberName`, `policyDbIds` as the `policy` filter takes them: decision 071),
 * without the store's internals (`shadowPolicyDbIds`, `stage`, `traceparent`).
 */
export type SinkEntry = Omit<AuditEntry, 'shadowPolicyDbIds' | 'stage' | 'traceparent'> & { user: string };

export function sinkEntryOf(entry: AuditEntry): SinkEntry {
  const { shadowPolicyDbIds: _shadowIds, stage: _stage, traceparent: _trace, sessionId, ...fields } = entry;
  return { ...fields, user: entry.memberName, ...(sessionId ? { sessionId } : {}) };
}
