-- 006: the OAuth client a call came through (issue 19, decision 053): Portcullis's own
-- authorization server issues access tokens that act as a member key; the entry names the
-- client beside the key record. '' for calls made with the member key itself. Added in place
-- (a metadata-only change; existing parts read the default).
ALTER TABLE {database:Identifier}.audit_entries ADD COLUMN IF NOT EXISTS oauth_client_id LowCardinality(String) DEFAULT '';

ALTER TABLE {database:Identifier}.audit_open ADD COLUMN IF NOT EXISTS oauth_client_id LowCardinality(String) DEFAULT '';
