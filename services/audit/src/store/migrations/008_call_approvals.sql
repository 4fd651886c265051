-- 008: call approvals (issue 20, decision 063). Each event of an approval is an entry of its
-- own: the approval it belongs to, which event (proposed | approved | denied | expired |
-- executed | returned), and the owner who approved or denied it. '' for every other entry.
-- Added in place (metadata-only; existing parts read the defaults).
ALTER TABLE {database:Identifier}.audit_entries ADD COLUMN IF NOT EXISTS approval_id String DEFAULT '';

ALTER TABLE {database:Identifier}.audit_entries ADD COLUMN IF NOT EXISTS approval_event LowCardinality(String) DEFAULT '';

ALTER TABLE {database:Identifier}.audit_entries ADD COLUMN IF NOT EXISTS approver_id String DEFAULT '';

ALTER TABLE {database:Identifier}.audit_entries ADD COLUMN IF NOT EXISTS approver_name String DEFAULT '';

ALTER TABLE {database:Identifier}.audit_open ADD COLUMN IF NOT EXISTS approval_id String DEFAULT '';

ALTER TABLE {database:Identifier}.audit_open ADD COLUMN IF NOT EXISTS approval_event LowCardinality(String) DEFAULT '';

ALTER TABLE {database:Identifier}.audit_open ADD COLUMN IF NOT EXISTS approver_id String DEFAULT '';

ALTER TABLE {database:Identifier}.audit_open ADD COLUMN IF NOT EXISTS approver_name String DEFAULT '';
