-- loom.opened_row with its user (migration 155) opened the row twice: the planner
-- flattens its subquery into the CASE, so the sealed text was unwrapped, derived and
-- decrypted once for the WHEN and again for the result (pg_stat_statements counted two
-- reads of the revision's key a row). OFFSET 0 keeps the subquery, so each row is opened
-- once: the same answer (every row of a 2,000-memory namespace hashes the same), and a
-- search's read of its ten heads costs Postgres about a quarter less
-- (docs/bench/RESULTS-search-100k.md, "Issue 35").
CREATE OR REPLACE FUNCTION loom.opened_row(r jsonb, sealed bytea, o text, ns text, s bigint, u text) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN coalesce(x.row->>'user_id', '') = '' AND u NOT IN ('', '-')
        THEN x.row || jsonb_build_object('user_id', loom.user_name(o, u)) ELSE x.row END
    FROM (SELECT loom.opened_row(r, sealed, o, ns, s) AS row OFFSET 0) x
$$;
