-- An index a lookup must name. A plan made while a namespace's statistics are small (a
-- new deployment, a namespace grown since the last ANALYZE, a cached generic plan) costs
-- every index that leads with (org, namespace) alike, and took memory_current_by_content,
-- the newest, for lookups by key: binding only that prefix, it filtered the namespace's
-- every head once per key (internal/heads, measured in the set bench at 3-5 ms a call
-- at a few hundred heads). The columns are NOT NULL, so the predicates exclude no row;
-- they only make these indexes candidates for a query that constrains their column.
CREATE INDEX memory_current_by_content_named ON loom.memory_current (org, namespace, content_sha256)
    WHERE content_sha256 IS NOT NULL;
DROP INDEX loom.memory_current_by_content;
ALTER INDEX loom.memory_current_by_content_named RENAME TO memory_current_by_content;

CREATE INDEX memory_current_by_id_named ON loom.memory_current (org, memory_id)
    WHERE memory_id IS NOT NULL;
DROP INDEX loom.memory_current_by_id;
ALTER INDEX loom.memory_current_by_id_named RENAME TO memory_current_by_id;
