import type { Session } from 'chdb';

/**
 * The export's same-run baseline: the engine's own CSV of the export's columns for `agentIds`,
 * read in the table's sort order (`agent_id, timestamp, id`, the order the store exports in)
 * on one thread, streamed to nowhere. No FINAL: the table holds each entry once. What is left
 * between this and the product is the product's own cost (formatting SQL, gRPC, HTTP).
 */
export async function engineCsvExport(session: Session, database: string, agentIds: readonly string[]): Promise<{ rows: number; rowsPerSecond: number }> {
  const started = performance.now();
  let rows = 0;
  const stream = session.queryStreamBind(
    `SELECT timestamp, agent_name, member_name, tool, service, resource, decision, reason, duration_ms, matched_policy_ids
     FROM {database:Identifier}.audit_entries WHERE agent_id IN {agentIds:Array(String)}
     ORDER BY agent_id, timestamp, id SETTINGS max_block_size = 8192, max_threads = 1`,
    { database, agentIds: [...agentIds] }, { format: 'CSV' });
  for await (const chunk of stream) rows += chunk.numRows;
  return { rows, rowsPerSecond: rows / ((performance.now() - started) / 1000) };
}
