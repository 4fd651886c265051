-- 010: a page's total for a filter on agents, service, tool and result without a time range
-- counted from an aggregate projection (per part: how many entries each agent, service, tool
-- and decision has) instead of scanning those columns of every match: measured 32–44 ms for a
-- service, tool or result filter at 10M entries before (bench/README, issue 17). The engine
-- keeps the projection with each part (inserts, merges); a lightweight delete (settling
-- orphans, a late completion replacing one) rebuilds it for the parts it touches.
ALTER TABLE {database:Identifier}.audit_entries MODIFY SETTING lightweight_mutation_projection_mode = 'rebuild';

ALTER TABLE {database:Identifier}.audit_entries ADD PROJECTION IF NOT EXISTS call_counts
(SELECT agent_id, service, tool, decision, count() GROUP BY agent_id, service, tool, decision);

ALTER TABLE {database:Identifier}.audit_entries MATERIALIZE PROJECTION call_counts;
