/**
 * Synthetic audit rows generated inside the engine (`INSERT … SELECT … FROM numbers()`), for
 * tests and benchmarks that need millions of rows: building them in JS and inserting them
 * would take minutes, this takes seconds. Rows go into the real `audit_entries` table through
 * named columns, so a column added later (with its default) does not break the seed.
 *
 * Row `n` (0-based, counted from `first`) is a deterministic function of `n`:
 * - agent `agent-<k>` for k in 0..agents-1 (cityHash-spread), named `Agent <k>`;
 * - member `0195f0a0-0000-7000-8000-<12-digit m>` for m in 0..members-1, named `member<m>@example.com`,
 *   each a member of one agent (m ≡ k mod agents), as memberships are in the product: a
 *   member id is one person's membership of one agent;
 * - one of 16 services and 18 tools per service (`<service>_tool_<t>`);
 * - DENY for one row in 8, with two matched policies (`night-forbid`, `repo-guard`) of the
 *   row's agent (database ids `policy-db-<k>-1`, `policy-db-<k>-2`: policies belong to one
 *   agent); ALLOW rows match none;
 * - timestamps `stepMs` apart from `startMs`, so rows arrive in time order;
 * - a resource with double quotes and a reason with a comma on DENY rows (CSV must quote them),
 *   and tool arguments of ~150 bytes of JSON.
 */
export interface SeedOptions {
  database: string;
  count: number;
  /** Number of the first row (default 0), so several calls can add disjoint rows. */
  first?: number;
  agents?: number;
  members?: number;
  /** Epoch milliseconds of row 0 (default 2026-08-03T00:00:00Z). */
  startMs?: number;
  /** Milliseconds between consecutive rows (default 1). */
  stepMs?: number;
}

export const SEED_SERVICES = [
  'github', 'slack', 'linear', 'jira', 'notion', 'gdrive', 'gmail', 'gcal',
  'confluence', 'asana', 'hubspot', 'salesforce', 'zendesk', 'stripe', 'sentry', 'datadog',
] as const;

/** The database id of the agent `k`'s policy `p` (1 or 2), as the seed writes it. */
export function seedPolicyDbId(k: number, p: 1 | 2): string {
  return `policy-db-${k}-${p}`;
}

/** The member id of member number `m` (a member of agent `m % agents`), as the seed writes it. */
export function seedMemberId(m: number): string {
  return `0195f0a0-0000-7000-8000-${String(m).padStart(12, '0')}`;
}

/** The statement and its bound parameters; run it with any client of the store's engine. */
export function seedStatement(options: SeedOptions): { sql: string; params: Record<string, unknown> } {
  const params = {
    database: options.database,
    count: options.count,
    first: options.first ?? 0,
    agents: options.agents ?? 200,
    members: options.members ?? 2_000,
    startMs: options.startMs ?? Date.UTC(2026, 7, 3),
    stepMs: options.stepMs ?? 1,
    services: [...SEED_SERVICES],
  };
  const sql = `
    INSERT INTO {database:Identifier}.audit_entries
      (id, timestamp, agent_id, agent_name, member_id, member_name, member_key_id, session_id, service, tool, action,
       resource, caller_ip, tool_args, decision, reason, matched_policy_ids, matched_policy_names, policy_version_ids,
       policy_db_ids, duration_ms, principal)
    SELECT
      generateUUIDv4(n) AS id,
      fromUnixTimestamp64Milli(toInt64({startMs:Int64} + toInt64(n) * {stepMs:Int64}), 'UTC') AS timestamp,
      concat('agent-', toString(k)) AS agent_id,
      concat('Agent ', toString(k)) AS agent_name,
      concat('0195f0a0-0000-7000-8000-', leftPad(toString(m), 12, '0')) AS member_id,
      concat('member', toString(m), '@example.com') AS member_name,
      concat('key-', toString(m), '-', toString(h % 3)) AS member_key_id,
      concat('session-', toString(intDiv(n, 7))) AS session_id,
      arrayElement({services:Array(String)}, 1 + (h % 16)) AS service,
      concat(service, '_tool_', toString(intDiv(h, 16) % 18)) AS tool,
      concat('Mcp::Action::"', tool, '"') AS action,
      concat('GithubMCP::Repository::"acme/repo-', toString(h % 500), '"') AS resource,
      '203.0.113.7' AS caller_ip,
      concat('{"title":"Issue ', toString(n), '","body":"Steps to reproduce: open the page, click save, see the error.","labels":["bug","p', toString(h % 4), '"]}') AS tool_args,
      if(deny, 'DENY', 'ALLOW') AS decision,
      if(deny, 'Blocked by night-forbid, ask an owner', 'No forbid policy matched') AS reason,
      if(deny, ['night-forbid', 'repo-guard'], []) AS matched_policy_ids,
      if(deny, ['Night forbid', 'Repo guard'], []) AS matched_policy_names,
      if(deny, ['policy-version-1', 'policy-version-2'], []) AS policy_version_ids,
      if(deny, [concat('policy-db-', toString(k), '-1'), concat('policy-db-', toString(k), '-2')], []) AS policy_db_ids,
      (h % 100000) / 100 AS duration_ms,
      concat('Portcullis::Member::"', member_id, '"') AS principal
    FROM (
      SELECT number + {first:UInt64} AS n, cityHash64(n) AS h, (h % {agents:UInt32}) AS k,
             (k + {agents:UInt32} * (cityHash64(n, 1) % greatest(1, intDiv({members:UInt32}, {agents:UInt32})))) % {members:UInt32} AS m,
             (intDiv(h, 7) % 8 = 0) AS deny
      FROM numbers({count:UInt64})
    )
    SETTINGS max_insert_threads = 1`;
  return { sql, params };
}

/**
 * The statements that record seeded rows' agent and tool names in the rollups, as the audit
 * writer does for the entries it stores (migration 005): run once after seeding.
 */
export function seedRollupStatements(database: string): Array<{ sql: string; params: Record<string, unknown> }> {
  return [
    { sql: 'INSERT INTO {database:Identifier}.audit_agent_names SELECT agent_id, toString(agent_name) FROM {database:Identifier}.audit_entries GROUP BY agent_id, agent_name', params: { database } },
    { sql: 'INSERT INTO {database:Identifier}.audit_tool_names SELECT toString(service), toString(tool) FROM {database:Identifier}.audit_entries GROUP BY service, tool', params: { database } },
  ];
}
