-- 007: what the agent's shadow policies would have decided (issue 20, decision 061): the
-- verdict with them enforced too ('' when the agent had no enabled shadow policy), and the
-- shadow policies that decided it (keys and database ids). The bloom index lets a policy's
-- shadow results (`ShadowResults`, decision 062) skip granules, as `policy_db_ids` does.
-- Added in place (metadata-only; existing parts read the defaults).
ALTER TABLE {database:Identifier}.audit_entries ADD COLUMN IF NOT EXISTS shadow_decision LowCardinality(String) DEFAULT '';

ALTER TABLE {database:Identifier}.audit_entries ADD COLUMN IF NOT EXISTS shadow_policy_ids Array(String);

ALTER TABLE {database:Identifier}.audit_entries ADD COLUMN IF NOT EXISTS shadow_policy_db_ids Array(String);

ALTER TABLE {database:Identifier}.audit_entries ADD INDEX IF NOT EXISTS shadow_policy_db_ids_bloom shadow_policy_db_ids TYPE bloom_filter(0.01) GRANULARITY 1;

ALTER TABLE {database:Identifier}.audit_open ADD COLUMN IF NOT EXISTS shadow_decision LowCardinality(String) DEFAULT '';

ALTER TABLE {database:Identifier}.audit_open ADD COLUMN IF NOT EXISTS shadow_policy_ids Array(String);

ALTER TABLE {database:Identifier}.audit_open ADD COLUMN IF NOT EXISTS shadow_policy_db_ids Array(String);
