-- The date anchor pool (query/anchor_pool.go) reads the heads of a namespace said within
-- a span of time the question names: their valid_at, which the head's JSON holds in the
-- clear (migration 056 seals the text, not the times). A commit writes RFC 3339 with its
-- offset, which casts to the same timestamptz under any TimeZone or DateStyle, so the
-- cast is immutable for every head written and can be indexed.
CREATE FUNCTION loom.head_valid_at(head jsonb) RETURNS timestamptz
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT (head->>'valid_at')::timestamptz $$;

-- Partial on its own expression (as migration 053's are on their columns), so a lookup
-- that does not name valid_at never takes it for the (org, namespace) prefix.
CREATE INDEX memory_current_said_at ON loom.memory_current (org, namespace, loom.head_valid_at(row))
    WHERE loom.head_valid_at(row) IS NOT NULL AND NOT (row->>'tombstone')::boolean;
