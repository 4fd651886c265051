-- 003: one row per audit entry, so reads need no FINAL (decision 035).
-- `audit_entries` becomes a plain MergeTree holding each entry once: completions, single-stage
-- entries (denials, refusals) and write-ahead records settled as orphans ("outcome not
-- recorded"). Write-ahead `decision` records whose completion has not been written yet live
-- in the small `audit_open` table; readers add the open ones (no completion in
-- `audit_entries`) to what they read, and the writer's housekeeping deletes closed ones and
-- settles orphans into `audit_entries`.
-- The sort key starts with the day: a newest-first page over many agents then reads the newest
-- day's block (a handful of granules) instead of the newest granule of every agent; within a
-- day, each agent's rows are contiguous, so agent filters still use the key.
-- Rollups the read path resolves filters against: the agent names and the tools seen in the
-- data (a handful of rows per agent / tool, kept by materialized views).
-- The old table is copied (FINAL, so each entry once) into the new ones, then swapped. Run it
-- with the writers stopped (the audit service migrates first). Re-runnable up to the RENAME;
-- a run cut off between the RENAME and its record in schema_migrations (a window of one
-- statement) is finished by running the statements after the RENAME and recording version 3.
DROP TABLE IF EXISTS {database:Identifier}.audit_entries_002;

DROP TABLE IF EXISTS {database:Identifier}.audit_entries_staged;

CREATE TABLE {database:Identifier}.audit_entries_staged
(
    id                   UUID,
    timestamp            DateTime64(3, 'UTC'),
    agent_id             String,
    agent_name           LowCardinality(String),
    member_id            String,
    member_name          String,
    member_key_id        String,
    session_id           Nullable(String),
    service              LowCardinality(String),
    tool                 LowCardinality(String),
    action               LowCardinality(String),
    resource             String,
    caller_ip            String,
    tool_args            String CODEC(ZSTD(3)),
    decision             LowCardinality(String),
    reason               String,
    matched_policy_ids   Array(String),
    matched_policy_names Array(String),
    policy_version_ids   Array(String),
    policy_db_ids        Array(String),
    duration_ms          Float64,
    principal            String,
    stage_rank           UInt8 DEFAULT 1,
    INDEX member_id_bloom member_id TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX policy_db_ids_bloom policy_db_ids TYPE bloom_filter(0.01) GRANULARITY 1
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(timestamp)
ORDER BY (toDate(timestamp), agent_id, timestamp, id);

CREATE TABLE IF NOT EXISTS {database:Identifier}.audit_open
(
    id                   UUID,
    timestamp            DateTime64(3, 'UTC'),
    agent_id             String,
    agent_name           LowCardinality(String),
    member_id            String,
    member_name          String,
    member_key_id        String,
    session_id           Nullable(String),
    service              LowCardinality(String),
    tool                 LowCardinality(String),
    action               LowCardinality(String),
    resource             String,
    caller_ip            String,
    tool_args            String CODEC(ZSTD(3)),
    decision             LowCardinality(String),
    reason               String,
    matched_policy_ids   Array(String),
    matched_policy_names Array(String),
    policy_version_ids   Array(String),
    policy_db_ids        Array(String),
    duration_ms          Float64,
    principal            String,
    stage_rank           UInt8 DEFAULT 1,
    INDEX member_id_bloom member_id TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX policy_db_ids_bloom policy_db_ids TYPE bloom_filter(0.01) GRANULARITY 1
)
ENGINE = MergeTree
PARTITION BY toYYYYMMDD(timestamp)
ORDER BY (agent_id, timestamp, id);

INSERT INTO {database:Identifier}.audit_entries_staged
SELECT id, timestamp, agent_id, agent_name, member_id, member_name, member_key_id, session_id, service, tool, action,
     resource, caller_ip, tool_args, decision, reason, matched_policy_ids, matched_policy_names, policy_version_ids,
     policy_db_ids, duration_ms, principal, stage_rank
FROM {database:Identifier}.audit_entries FINAL
WHERE stage_rank = 1;

INSERT INTO {database:Identifier}.audit_open
SELECT id, timestamp, agent_id, agent_name, member_id, member_name, member_key_id, session_id, service, tool, action,
     resource, caller_ip, tool_args, decision, reason, matched_policy_ids, matched_policy_names, policy_version_ids,
     policy_db_ids, duration_ms, principal, stage_rank
FROM {database:Identifier}.audit_entries FINAL
WHERE stage_rank = 0;

RENAME TABLE {database:Identifier}.audit_entries TO {database:Identifier}.audit_entries_002,
             {database:Identifier}.audit_entries_staged TO {database:Identifier}.audit_entries;

DROP TABLE IF EXISTS {database:Identifier}.audit_entries_002;

CREATE TABLE IF NOT EXISTS {database:Identifier}.audit_agent_names
(
    agent_id   String,
    agent_name String
)
ENGINE = ReplacingMergeTree
ORDER BY (agent_id, agent_name);

CREATE MATERIALIZED VIEW IF NOT EXISTS {database:Identifier}.audit_agent_names_mv TO {database:Identifier}.audit_agent_names
AS SELECT agent_id, toString(agent_name) AS agent_name FROM {database:Identifier}.audit_entries GROUP BY agent_id, agent_name;

CREATE TABLE IF NOT EXISTS {database:Identifier}.audit_tool_names
(
    service String,
    tool    String
)
ENGINE = ReplacingMergeTree
ORDER BY (service, tool);

CREATE MATERIALIZED VIEW IF NOT EXISTS {database:Identifier}.audit_tool_names_mv TO {database:Identifier}.audit_tool_names
AS SELECT toString(service) AS service, toString(tool) AS tool FROM {database:Identifier}.audit_entries GROUP BY service, tool;

INSERT INTO {database:Identifier}.audit_agent_names
SELECT agent_id, toString(agent_name) FROM {database:Identifier}.audit_entries GROUP BY agent_id, agent_name;

INSERT INTO {database:Identifier}.audit_tool_names
SELECT toString(service), toString(tool) FROM {database:Identifier}.audit_entries GROUP BY service, tool;

-- In-flight calls of an agent or tool not yet seen complete are found by name too.
CREATE MATERIALIZED VIEW IF NOT EXISTS {database:Identifier}.audit_open_agent_names_mv TO {database:Identifier}.audit_agent_names
AS SELECT agent_id, toString(agent_name) AS agent_name FROM {database:Identifier}.audit_open GROUP BY agent_id, agent_name;

CREATE MATERIALIZED VIEW IF NOT EXISTS {database:Identifier}.audit_open_tool_names_mv TO {database:Identifier}.audit_tool_names
AS SELECT toString(service) AS service, toString(tool) AS tool FROM {database:Identifier}.audit_open GROUP BY service, tool;

INSERT INTO {database:Identifier}.audit_agent_names
SELECT agent_id, toString(agent_name) FROM {database:Identifier}.audit_open GROUP BY agent_id, agent_name;

INSERT INTO {database:Identifier}.audit_tool_names
SELECT toString(service), toString(tool) FROM {database:Identifier}.audit_open GROUP BY service, tool;
