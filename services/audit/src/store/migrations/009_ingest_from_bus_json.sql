-- 009: the writer inserts entries as the bus carries them, JSON text one per line, into
-- `audit_ingest` (engine Null: it keeps nothing) and these views write the rows: completions
-- and single-stage entries to `audit_entries`, write-ahead records (`stage` = 'decision') to
-- `audit_open`. ClickHouse's parser does what JavaScript did per entry before (build a row,
-- serialise it again): measured 83k entries/s against 40k/s (bench/README, issue 17).
-- Columns are named as the entry's JSON fields; a field absent from the JSON takes the
-- column's default. Objects read as their JSON text (`toolArgs`: the writer's insert sets
-- `input_format_json_read_objects_as_strings`).
-- A new audit column needs a column here and a line in both views: `audit-store.test.ts`
-- fails while some column of `audit_entries` or `audit_open` is not written by its view.
CREATE TABLE IF NOT EXISTS {database:Identifier}.audit_ingest
(
    id                 UUID,
    timestamp          DateTime64(3, 'UTC'),
    agentId            String,
    agentName          String,
    memberId           String,
    memberName         String,
    memberKeyId        String,
    sessionId          Nullable(String),
    service            String,
    tool               String,
    action             String,
    resource           String,
    callerIp           String,
    toolArgs           String,
    decision           String,
    reason             String,
    matchedPolicyIds   Array(String),
    matchedPolicyNames Array(String),
    policyVersionIds   Array(String),
    policyDbIds        Array(String),
    durationMs         Float64,
    principal          String,
    stage              String,
    oauthClientId      String,
    shadowDecision     String,
    shadowPolicyIds    Array(String),
    shadowPolicyDbIds  Array(String),
    approvalId         String,
    approvalEvent      String,
    approverId         String,
    approverName       String
)
ENGINE = Null;

CREATE MATERIALIZED VIEW IF NOT EXISTS {database:Identifier}.audit_ingest_entries_mv TO {database:Identifier}.audit_entries
AS SELECT id, timestamp, agentId AS agent_id, agentName AS agent_name, memberId AS member_id, memberName AS member_name,
    memberKeyId AS member_key_id, sessionId AS session_id, service, tool, action, resource, callerIp AS caller_ip,
    toolArgs AS tool_args, decision, reason, matchedPolicyIds AS matched_policy_ids, matchedPolicyNames AS matched_policy_names,
    policyVersionIds AS policy_version_ids, policyDbIds AS policy_db_ids, durationMs AS duration_ms, principal,
    toUInt8(1) AS stage_rank, oauthClientId AS oauth_client_id, shadowDecision AS shadow_decision,
    shadowPolicyIds AS shadow_policy_ids, shadowPolicyDbIds AS shadow_policy_db_ids,
    approvalId AS approval_id, approvalEvent AS approval_event, approverId AS approver_id, approverName AS approver_name
FROM {database:Identifier}.audit_ingest
WHERE stage != 'decision';

CREATE MATERIALIZED VIEW IF NOT EXISTS {database:Identifier}.audit_ingest_open_mv TO {database:Identifier}.audit_open
AS SELECT id, timestamp, agentId AS agent_id, agentName AS agent_name, memberId AS member_id, memberName AS member_name,
    memberKeyId AS member_key_id, sessionId AS session_id, service, tool, action, resource, callerIp AS caller_ip,
    toolArgs AS tool_args, decision, reason, matchedPolicyIds AS matched_policy_ids, matchedPolicyNames AS matched_policy_names,
    policyVersionIds AS policy_version_ids, policyDbIds AS policy_db_ids, durationMs AS duration_ms, principal,
    toUInt8(0) AS stage_rank, oauthClientId AS oauth_client_id, shadowDecision AS shadow_decision,
    shadowPolicyIds AS shadow_policy_ids, shadowPolicyDbIds AS shadow_policy_db_ids,
    approvalId AS approval_id, approvalEvent AS approval_event, approverId AS approver_id, approverName AS approver_name
FROM {database:Identifier}.audit_ingest
WHERE stage = 'decision';
