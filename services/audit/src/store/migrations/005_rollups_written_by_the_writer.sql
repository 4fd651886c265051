-- 005: the agent-name and tool-name rollups are written by the audit writer, no longer by
-- materialized views (decision 035, third slice). A view runs at every insert into its source
-- table: the four of them (two on audit_entries, two on audit_open) cost 11–18 ms of a batch's
-- 63–82 ms on the embedded engine (measured, batches of 300 and 1,000), while nearly every
-- batch holds only names the rollups already have. The writer now inserts the (agent, name) and
-- (service, tool) pairs it has not written yet, before the batch's entries. The rollups keep
-- every pair the views wrote: nothing to copy.
DROP VIEW IF EXISTS {database:Identifier}.audit_agent_names_mv;

DROP VIEW IF EXISTS {database:Identifier}.audit_tool_names_mv;

DROP VIEW IF EXISTS {database:Identifier}.audit_open_agent_names_mv;

DROP VIEW IF EXISTS {database:Identifier}.audit_open_tool_names_mv;
