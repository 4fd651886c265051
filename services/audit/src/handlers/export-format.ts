import type { AuditEntry } from '@portcullis/core';

/*
 * The export's text, specified in JS. The engine produces it (`store/export-lines.ts` has
 * the SQL), and `audit-store.test.ts` checks the engine's bytes against these functions for
 * awkward values; the handler itself only sends `CSV_HEADER` and forwards engine output.
 * A redacted agent's entry is written as `redactPolicyIdentities` (core) returns it.
 */

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

/** First characters that make a spreadsheet read a cell as a formula (OWASP "CSV Injection"). */
export const FORMULA_TRIGGERS = ['=', '+', '-', '@', '\t', '\r'] as const;

/**
 * Spreadsheet-formula guard (decision 018): a text cell that starts with `=`, `+`, `-`, `@`,
 * tab or CR gets a leading `'`, so Excel, LibreOffice and Sheets show it as text instead of
 * evaluating it. Audit text comes from agents and upstreams, i.e. from outside.
 */
export function formulaGuard(value: string): string {
  return (FORMULA_TRIGGERS as readonly string[]).includes(value.charAt(0)) ? `'${value}` : value;
}

/** An entry as one CSV record of `CSV_COLUMNS`; text cells are formula-guarded, then quoted. */
export function csvLine(entry: AuditEntry): string {
  return csvRecord([
    entry.timestamp,
    formulaGuard(entry.agentName),
    formulaGuard(entry.memberName),
    formulaGuard(entry.tool),
    formulaGuard(entry.service),
    formulaGuard(entry.resource),
    entry.decision,
    formulaGuard(entry.reason),
    String(entry.durationMs),
    formulaGuard(entry.matchedPolicyIds.join(POLICY_ID_SEPARATOR)),
  ]);
}

/** An entry as one NDJSON line, in the same field names the Query API returns. */
export function ndjsonLine(entry: AuditEntry): string {
  return `${JSON.stringify(entry)}\n`;
}
