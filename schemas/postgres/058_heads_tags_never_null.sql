-- A head's tags are a JSON list. Copies of a head without tags (the entity extractor's
-- revision among them) stored "tags": null, and the readers that unnest a namespace's
-- tags (memory.set_from_messages' categories) failed on it (SQLSTATE 22023). The commit
-- now writes an empty list; this repairs the heads stored before it. The journal's rows
-- are left: they are read back into Go (a null is an empty list there), and a copy of
-- one commits through the same commit. A head sealed at rest (migration 056) keeps its
-- tags in the seal, which the commit writes as a list.
UPDATE loom.memory_current
SET row = jsonb_set(row, '{tags}', '[]'::jsonb)
WHERE sealed IS NULL AND jsonb_typeof(row -> 'tags') IS DISTINCT FROM 'array';
