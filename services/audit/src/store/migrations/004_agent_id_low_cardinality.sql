-- 004: `agent_id` as LowCardinality(String) in both audit tables (decision 035, second slice).
-- Every read is bounded to the caller's agents (`agent_id IN {agentIds:Array(String)}`). On a
-- plain String column that test hashed every row's id: measured at 10M entries over 200
-- agents, 25 ms of a 31 ms count. On LowCardinality it is decided once per dictionary entry.
-- A store holds thousands of agents at most, well within a dictionary. The values and the
-- sort order do not change, so the key column may be converted; the mutation rewrites the
-- column's files in the background while reads go on.
ALTER TABLE {database:Identifier}.audit_entries MODIFY COLUMN agent_id LowCardinality(String);

ALTER TABLE {database:Identifier}.audit_open MODIFY COLUMN agent_id LowCardinality(String);
