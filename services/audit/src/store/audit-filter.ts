import type { Decision } from '@portcullis/core';
import { toClickHouseTime } from './entry-row.ts';

/**
 * The audit filters of the interface specification, already validated. Every field but
 * `agentIds` is optional; an absent field does not filter.
 */
export interface AuditFilter {
  /** The agents the caller may see. Empty: nothing matches. */
  agentIds: readonly string[];
  /** Inclusive lower bound. */
  from?: Date;
  /** Inclusive upper bound. */
  to?: Date;
  /**
   * Case-insensitive substring of the agent name: the name an entry was recorded with, or the
   * agent's current name (`agentIdsByCurrentName`). Matches whole agents (decision 035).
   */
  agent?: string;
  /** Of `agentIds`, the agents whose current name contains `agent` (the caller knows current names). */
  agentIdsByCurrentName?: readonly string[];
  /** Exact connector key. */
  service?: string;
  /** Case-insensitive substring of the tool name. */
  tool?: string;
  result?: Decision;
  /** Exact member id; an e-mail is compared as an id too, so it matches nothing. */
  member?: string;
  /** Exact policy database id; a policy key is compared as an id too, so it matches nothing. */
  policy?: string;
}

/**
 * A filter whose name substrings were resolved against the store's rollups (`resolveFilter`):
 * `agentIds` narrowed to the agents the `agent` substring matches, `tools` the tool names
 * the `tool` substring matches, so that both filter on key and low-cardinality columns.
 */
export interface ResolvedFilter extends Omit<AuditFilter, 'agent' | 'tool' | 'agentIdsByCurrentName'> {
  /** Exact tool names; absent = any tool. */
  tools?: readonly string[];
}

/** A WHERE clause whose every value is a bound `{name:Type}` parameter. */
export interface BoundWhere {
  sql: string;
  params: Record<string, unknown>;
}

/**
 * Builds the WHERE clause for `filter`. Only the SQL text of the conditions depends on
 * which filters are present; values always travel as parameters.
 */
export function whereOf(filter: ResolvedFilter): BoundWhere {
  const conditions = ['agent_id IN {agentIds:Array(String)}'];
  const params: Record<string, unknown> = { agentIds: [...filter.agentIds] };
  // Each bound is also stated on the day, the main table's first sort column: the engine does
  // not carry a bound on `timestamp` over to `toDate(timestamp)` on its own, and without it a
  // one-day range read every later day of the month's part (16 granules instead of 288 at 10M
  // entries, bench/README, issue 17). `toDate32`: the bound may be any instant DateTime64
  // holds (to 2299), past the end of `Date` (2149), where `toDate` would wrap.
  if (filter.from) {
    conditions.push("timestamp >= {from:DateTime64(3, 'UTC')}", "toDate(timestamp) >= toDate32({from:DateTime64(3, 'UTC')})");
    params.from = toClickHouseTime(filter.from);
  }
  if (filter.to) {
    conditions.push("timestamp <= {to:DateTime64(3, 'UTC')}", "toDate(timestamp) <= toDate32({to:DateTime64(3, 'UTC')})");
    params.to = toClickHouseTime(filter.to);
  }
  if (filter.service !== undefined) {
    conditions.push('service = {service:String}');
    params.service = filter.service;
  }
  if (filter.tools !== undefined) {
    conditions.push('tool IN {tools:Array(String)}');
    params.tools = [...filter.tools];
  }
  if (filter.result !== undefined) {
    conditions.push('decision = {result:String}');
    params.result = filter.result;
  }
  if (filter.member !== undefined) {
    conditions.push('member_id = {member:String}');
    params.member = filter.member;
  }
  if (filter.policy !== undefined) {
    conditions.push('has(policy_db_ids, {policy:String})');
    params.policy = filter.policy;
  }
  return { sql: conditions.join(' AND '), params };
}
