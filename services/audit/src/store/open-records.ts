/**
 * Write-ahead `decision` records whose completion is not in `audit_entries` yet (decision 035).
 *
 * An allowed call is published twice under one id: its `decision` record before it goes
 * upstream, its completion after. The main table holds each entry once, so a decision record
 * goes there only as an orphan; until then it waits in the small `audit_open` table:
 * - the writer drops a decision record whose completion is in the same batch (the usual case),
 *   and writes the others to `audit_open`;
 * - readers add the open records, i.e. those of `audit_open` with no row of the same key in
 *   `audit_entries`, to what they read (`OPEN_ROWS`);
 * - housekeeping deletes closed records and, once no completion can still arrive, settles the
 *   rest into `audit_entries` as orphans ("outcome not recorded").
 * Every fragment is fixed text with `{name:Type}` parameters.
 */

const MAIN = '{database:Identifier}.audit_entries';
const OPEN = '{database:Identifier}.audit_open';

/**
 * Keys of `audit_open` rows that have a row in `audit_entries`. Bounded by the agents and the
 * oldest time in `audit_open`, so the primary key keeps the probe of the main table small.
 */
const CLOSED_KEYS = `SELECT agent_id, timestamp, id FROM ${MAIN}
  WHERE agent_id IN (SELECT agent_id FROM ${OPEN}) AND timestamp >= (SELECT min(timestamp) FROM ${OPEN})`;

/** The open records matching `where` (each once, a redelivered copy included). */
export function openRowsSql(columns: string, where: string): string {
  return `SELECT ${columns} FROM ${OPEN} WHERE ${where} AND (agent_id, timestamp, id) NOT IN (${CLOSED_KEYS})`;
}

/** Deletes the `audit_open` rows whose entry is in `audit_entries` now. */
export const DELETE_CLOSED_SQL = `DELETE FROM ${OPEN} WHERE (agent_id, timestamp, id) IN (${CLOSED_KEYS})`;

/** Copies the open records older than `{cutoff}` into `audit_entries`, each once. */
export function settleOrphansSql(columns: string): string {
  return `INSERT INTO ${MAIN} (${columns})
    SELECT ${columns} FROM ${OPEN}
    WHERE timestamp < {cutoff:DateTime64(3, 'UTC')} AND (agent_id, timestamp, id) NOT IN (${CLOSED_KEYS})
    ORDER BY timestamp LIMIT 1 BY id`;
}

/** Removes what `settleOrphansSql` settled (and anything closed) before `{cutoff}`. */
export const DELETE_SETTLED_SQL = `DELETE FROM ${OPEN} WHERE timestamp < {cutoff:DateTime64(3, 'UTC')}`;

/**
 * Rows already in `audit_entries` among `{ids}` (the batch's agents and time span bound the probe).
 * The ids travel as strings: an `Array(UUID)` parameter on the right of IN matches nothing on chDB 26.7.
 */
export const EXISTING_ROWS_SQL = `SELECT toString(id) AS id, stage_rank FROM ${MAIN}
  WHERE agent_id IN {agentIds:Array(String)} AND timestamp >= {from:DateTime64(3, 'UTC')} AND timestamp <= {to:DateTime64(3, 'UTC')}
    AND id IN {ids:Array(String)}`;

/** Deletes orphans (settled decision records) among `{ids}`: their completion arrived after all. */
export const DELETE_ORPHANS_SQL = `DELETE FROM ${MAIN}
  WHERE agent_id IN {agentIds:Array(String)} AND timestamp >= {from:DateTime64(3, 'UTC')} AND timestamp <= {to:DateTime64(3, 'UTC')}
    AND id IN {ids:Array(String)} AND stage_rank = 0`;
