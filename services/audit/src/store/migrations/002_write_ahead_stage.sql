-- 002: write-ahead audit. An allowed call is recorded twice under one id: a `decision` row
-- (durably accepted before the call goes upstream) and a `complete` row once the upstream
-- answered. `stage_rank` (0 decision, 1 complete) becomes the ReplacingMergeTree version, so
-- FINAL and merges keep the complete row whatever order the two arrive in (a redelivered
-- decision row never replaces its completion). The engine's version column cannot be added in
-- place: the table is rebuilt and swapped.
-- Re-runnable: a run interrupted after the swap starts by dropping the old copy, then copies
-- the (already new) table again; duplicate rows collapse like any redelivery.
-- Run it with the writers stopped (the audit service applies migrations before its writer
-- starts): a row inserted into the old table between the copy and the swap would be dropped.
DROP TABLE IF EXISTS {database:Identifier}.audit_entries_001;

CREATE TABLE IF NOT EXISTS {database:Identifier}.audit_entries_staged
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
ENGINE = ReplacingMergeTree(stage_rank)
PARTITION BY toYYYYMM(timestamp)
ORDER BY (agent_id, timestamp, id);

INSERT INTO {database:Identifier}.audit_entries_staged
    (id, timestamp, agent_id, agent_name, member_id, member_name, member_key_id, session_id, service, tool, action,
     resource, caller_ip, tool_args, decision, reason, matched_policy_ids, matched_policy_names, policy_version_ids,
     policy_db_ids, duration_ms, principal)
SELECT id, timestamp, agent_id, agent_name, member_id, member_name, member_key_id, session_id, service, tool, action,
     resource, caller_ip, tool_args, decision, reason, matched_policy_ids, matched_policy_names, policy_version_ids,
     policy_db_ids, duration_ms, principal
FROM {database:Identifier}.audit_entries;

RENAME TABLE {database:Identifier}.audit_entries TO {database:Identifier}.audit_entries_001,
             {database:Identifier}.audit_entries_staged TO {database:Identifier}.audit_entries;

DROP TABLE IF EXISTS {database:Identifier}.audit_entries_001;
