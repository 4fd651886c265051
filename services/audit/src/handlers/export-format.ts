import type { AuditEntry } from '@portcullis/core';

/** The CSV columns of the spec's export, in order; `callerIp` is deliberately not one. */
export const CSV_COLUMNS = ['timestamp', 'agent', 'member', 'tool', 'service', 'resource', 'decision', 'reason', 'duration', 'matched_policy_ids'] as const;

/** Separates several matched policy keys inside the one `matched_policy_ids` cell. */
export const POLICY_ID_SEPARATOR = ';';

/**
 * RFC 4180 quoting: a field holding a comma, a double quote, CR or LF is wrapped in double
 * quotes with inner quotes doubled; any other field is written as is.
 */
export function csvField(value: string): string {
  return /[",\r\n]/.test(value) ? `"${value.replace(/"/g, '""')}"` : value;
}

/** One CSV record, CRLF-terminated as RFC 4180 has it. */
export function csvRecord(fields: readonly string[]): string {
  return `${fields.map(csvField).join(',')}\r\n`;
}

export const CSV_HEADER = csvRecord(CSV_COLUMNS);

/** An entry as one CSV record of `CSV_COLUMNS`. */
export function csvLine(entry: AuditEntry): string {
  return csvRecord([
    entry.timestamp,
    entry.agentName,
    entry.memberName,
    entry.tool,
    entry.service,
    entry.resource,
    entry.decision,
    entry.reason,
    String(entry.durationMs),
    entry.matchedPolicyIds.join(POLICY_ID_SEPARATOR),
  ]);
}

/** An entry as one NDJSON line, in the same field names the Query API returns. */
export function ndjsonLine(entry: AuditEntry): string {
  return `${JSON.stringify(entry)}\n`;
}

/** The entry with every policy identity (keys, names, database ids, versions) emptied. */
export function redactPolicyIdentities(entry: AuditEntry): AuditEntry {
  return { ...entry, matchedPolicyIds: [], matchedPolicyNames: [], policyDbIds: [], policyVersionIds: [] };
}
