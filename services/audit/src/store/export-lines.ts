/**
 * The export's lines, formatted by the engine: one SQL expression per format that turns a
 * row of `audit_entries` into exactly the text the JS reference formatter
 * (`handlers/export-format.ts`) writes for that entry, so Node only forwards bytes.
 *
 * Why the engine and not Node: parsing JSONEachRow and formatting in JS capped exports at
 * ~67k rows/s; the engine formats 1M rows in well under a second. Why one String column
 * written as `TabSeparatedRaw` rather than the engine's `CSV` / `JSONEachRow` formats:
 * - its CSV writer quotes every string (RFC 4180 allows it, but it changes today's bytes),
 *   and it has no switch for "quote only if needed";
 * - `JSONEachRow` cannot omit a NULL `sessionId` nor embed `tool_args` (JSON text) as an
 *   object, both of which the API's entries do.
 * `TabSeparatedRaw` writes a String column without any escaping, one row per line, so each
 * record is ours to the byte; the line feed it appends ends the record (CSV lines end in
 * `\r` in the expression, giving CRLF).
 *
 * Every fragment here is fixed text; request values only ever travel as the bound
 * parameter `{redactAgentIds:Array(String)}` (and the filter's own parameters).
 */

import { POLICY_FAILED_REASON, POLICY_FAILED_REDACTED, POLICY_NAMED_REASON } from '@portcullis/core';

/** The engine output format the lines are written in. */
export const EXPORT_LINE_FORMAT = 'TabSeparatedRaw';

/**
 * `redacted` is true for rows of agents listed in `redact_policy_agent_ids`: their policy
 * identities (keys, names, database ids, versions) are emptied and their reason loses the
 * policy names the proxy wrote into it — `redactPolicyIdentities` in core, decision 022.
 */
export const REDACTED_ALIAS = 'has({redactAgentIds:Array(String)}, agent_id) AS redacted';

/** A SQL string literal of fixed text of ours (never a request value). */
function literal(text: string): string {
  return `'${text.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;
}

/**
 * The reason as the reader sees it: for a redacted row, `reasonWithoutPolicyNames` of core,
 * with its very patterns (written to read the same in RE2). `if` evaluates lazily, so rows
 * that are not redacted never run a regex.
 */
const REASON = `if(redacted, if(match(reason, ${literal(POLICY_FAILED_REASON.source)}), ${literal(POLICY_FAILED_REDACTED)}, `
  + String.raw`replaceRegexpOne(reason, ${literal(POLICY_NAMED_REASON.source)}, '\\1')), reason)`;

/**
 * Spreadsheet-formula guard, as in `formulaGuard` of the JS reference: a cell starting with
 * `=`, `+`, `-`, `@`, tab or CR gets a leading `'`. Written as a regex replacement so that on
 * a LowCardinality column it runs once per dictionary entry.
 */
function guarded(expr: string): string {
  return String.raw`replaceRegexpOne(${expr}, '^([=+\\-@\\t\\r])', '''\\1')`;
}

/**
 * An RFC 4180 cell, as `csvField` of the JS reference: quoted (inner quotes doubled) only
 * when it holds a comma, a double quote, CR or LF. `multiSearchAny` is a substring scan, far
 * cheaper than a regex over the whole value.
 */
function csvCell(expr: string): string {
  const value = guarded(expr);
  return String.raw`if(multiSearchAny(${value}, ['"', ',', '\r', '\n']), concat('"', replaceAll(${value}, '"', '""'), '"'), ${value})`;
}

/**
 * The same cell for a LowCardinality column, without `if`: a chain of one-argument string
 * functions runs once per dictionary entry instead of once per row (measured: 9 against
 * 18 ms per million rows for `tool`). On a plain String column this form would be slow
 * (the capturing regex over the whole value: ~650 ms per million rows), so it is used only
 * for `agent_name`, `tool` and `service`, which the table declares LowCardinality.
 */
function csvCellLowCardinality(column: string): string {
  return String.raw`replaceRegexpOne(replaceAll(${guarded(column)}, '"', '""'), '(?s)^(.*[",\\r\\n].*)$', '"\\1"')`;
}

/** `DateTime64(3, 'UTC')` as ISO 8601 with milliseconds and `Z`, as the API writes it. */
const ISO_TIMESTAMP = `concat(replaceOne(toString(timestamp), ' ', 'T'), 'Z')`;

/**
 * One CSV record of `CSV_COLUMNS` (timestamp, agent, member, tool, service, resource,
 * decision, reason, duration, matched_policy_ids), ending in `\r` (the format adds `\n`).
 * `decision` (ALLOW/DENY), the timestamp and the duration are never quoted or guarded:
 * their values cannot need it. No `caller_ip`.
 */
export const CSV_LINE = [
  ISO_TIMESTAMP,
  csvCellLowCardinality('agent_name'),
  csvCell('member_name'),
  csvCellLowCardinality('tool'),
  csvCellLowCardinality('service'),
  csvCell('resource'),
  'decision',
  csvCell(REASON),
  'toString(duration_ms)',
  csvCell(`if(redacted, '', arrayStringConcat(matched_policy_ids, ';'))`),
].join(`, ',', `);

/** JSON text of a value, as `JSON.stringify` would write it. */
const json = (expr: string) => `toJSONString(${expr})`;
/**
 * A JSON string of a value that never needs escaping (a UUID, our ISO timestamp): skipping
 * `toJSONString` there saves ~0.2 s per million rows for the id alone.
 */
const plainJsonString = (expr: string) => `concat('"', ${expr}, '"')`;
const policyArray = (column: string) => `if(redacted, '[]', ${json(column)})`;

/**
 * One NDJSON line: the whole entry in the API's field names and order (`fromRow`'s), with
 * `sessionId` left out when NULL, `toolArgs` embedded as the object it is (`{}` if the
 * stored text is not a JSON object, as `fromRow` does) and `stage` present only for a
 * write-ahead `decision` row (`stage_rank` 0) whose completion has not arrived. The shadow
 * fields (decision 061) are present only when the agent had shadow policies; a redacted row
 * keeps `shadowDecision` and empties their identities. The approval fields (decision 063) are
 * present only on an approval's events.
 */
export const NDJSON_LINE = [
  `'{"id":'`, plainJsonString('toString(id)'),
  `',"timestamp":'`, plainJsonString(ISO_TIMESTAMP),
  `',"agentId":'`, json('agent_id'),
  `',"agentName":'`, json('agent_name'),
  `',"memberId":'`, json('member_id'),
  `',"memberName":'`, json('member_name'),
  `',"memberKeyId":'`, json('member_key_id'),
  `if(isNull(session_id), '', concat(',"sessionId":', ${json('assumeNotNull(session_id)')}))`,
  `if(oauth_client_id = '', '', concat(',"oauthClientId":', ${json('oauth_client_id')}))`,
  `',"service":'`, json('service'),
  `',"tool":'`, json('tool'),
  `',"action":'`, json('action'),
  `',"resource":'`, json('resource'),
  `',"callerIp":'`, json('caller_ip'),
  `',"toolArgs":'`, `if(startsWith(tool_args, '{') AND isValidJSON(tool_args), tool_args, '{}')`,
  `',"decision":'`, json('decision'),
  `',"reason":'`, json(REASON),
  `',"matchedPolicyIds":'`, policyArray('matched_policy_ids'),
  `',"matchedPolicyNames":'`, policyArray('matched_policy_names'),
  `',"policyVersionIds":'`, policyArray('policy_version_ids'),
  `',"policyDbIds":'`, policyArray('policy_db_ids'),
  `',"durationMs":'`, 'toString(duration_ms)',
  `',"principal":'`, json('principal'),
  `if(shadow_decision = '', '', concat(',"shadowDecision":', ${json('shadow_decision')}, ',"shadowPolicyIds":', ${policyArray('shadow_policy_ids')}, ',"shadowPolicyDbIds":', ${policyArray('shadow_policy_db_ids')}))`,
  `if(approval_id = '', '', concat(',"approvalId":', ${json('approval_id')}, ',"approvalEvent":', ${json('approval_event')}))`,
  `if(approver_id = '', '', concat(',"approverId":', ${json('approver_id')}, ',"approverName":', ${json('approver_name')}))`,
  `if(stage_rank = 0, ',"stage":"decision"', '')`,
  `'}'`,
].join(', ');

/** The SELECT expression producing one line of `format`. */
export function exportLineOf(format: 'csv' | 'ndjson'): string {
  return format === 'csv' ? `concat(${CSV_LINE}, '\\r')` : `concat(${NDJSON_LINE})`;
}

/**
 * Settings of the export read, sorted newest first (`timestamp DESC, id DESC`, the list's
 * order; decision 071). The table's sort key starts with the day and the agent, so that
 * order is a sort, not a read in key order: it is kept to a bounded buffer that spills sorted
 * runs to disk and merges them (`max_bytes_before_external_sort`), so memory stays flat
 * however many rows match (measured on chDB, 1M rows of one day in 8 parts: +74 MB RSS at
 * most, 3.1 s against 2.4 s for the earlier read in key order). A page (`LIMIT`) is a top-N
 * sort and needs no spill. Small blocks on one thread. JSON strings keep `/` as is, as
 * `JSON.stringify` does.
 */
export const EXPORT_SETTINGS = 'SETTINGS max_block_size = 8192, max_threads = 1, max_bytes_before_external_sort = 33554432, output_format_json_escape_forward_slashes = 0';
