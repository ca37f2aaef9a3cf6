-- A memory's key is stored by its reference in loom.memory_current and
-- loom.memory_revisions (their memory_key columns, and so their primary and unique
-- keys, memory_current_by_key, memory_revisions_by_key and the WAL's records of them):
-- HMAC-SHA256 of 'loom.key:' || key under the org's user reference key (the key
-- loom.user_ref names users under; the prefix keeps a key's reference from ever being
-- a user's), lowercase hex. Equalities and joins keep their meaning; a scan ordered by
-- the column walks the keys in the references' order. The clear key lives only in the
-- row's sealed text (heads.AtRest), which loom.opened_row merges back over the row's
-- JSON, as it does the user id. Rows written before this migration keep their key in
-- their row JSON (their sealed text does not hold it), so they read as they did.

-- The stored form of a memory key in org o: NULL when the org has no key yet (then no
-- row of it is stored, so an equality with it matches nothing). A statement binds it
-- as an init plan, (SELECT loom.key_ref($org, $key)): the HMAC under the unwrapped
-- key is never inlined, and a bare call in a filter runs once a row scanned.
CREATE FUNCTION loom.key_ref(o text, k text) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT encode(hmac(convert_to('loom.key:' || k, 'UTF8'), loom.unwrapped_key(r.key), 'sha256'), 'hex')
    FROM loom.user_ref_keys r WHERE r.org = o
$$;

-- loom.key_ref of each of ks, in order, with the org's key unwrapped once: the lookups
-- of several keys bind it as (SELECT loom.key_refs($org, $keys)). NULL when the org
-- has no key.
CREATE FUNCTION loom.key_refs(o text, ks text[]) RETURNS text[]
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT array_agg(encode(hmac(convert_to('loom.key:' || u.k, 'UTF8'), x.key, 'sha256'), 'hex') ORDER BY u.i)
    FROM (SELECT loom.unwrapped_key(r.key) AS key FROM loom.user_ref_keys r WHERE r.org = o) x,
        unnest(ks) WITH ORDINALITY AS u(k, i)
$$;

-- Existing rows, in this one transaction, so no table is ever half keyed. An org that
-- holds rows and no key yet (its rows name no user but '-') gets one, stored raw as a
-- key made before LOOM_KEK is (the at-rest pass wraps it), as migration 155 made them.
-- Each row's JSON keeps its key: its sealed text does not hold it. The orgs' keys are
-- unwrapped in the statement, never kept in a table (a temporary one writes its pages).
INSERT INTO loom.user_ref_keys (org, key)
    SELECT org, gen_random_bytes(32) FROM (SELECT DISTINCT org FROM loom.memory_current
        UNION SELECT DISTINCT org FROM loom.memory_revisions) o
    ON CONFLICT (org) DO NOTHING;

UPDATE loom.memory_current t SET memory_key = encode(hmac(convert_to('loom.key:' || t.memory_key, 'UTF8'), k.key, 'sha256'), 'hex')
    FROM (SELECT org, loom.unwrapped_key(key) AS key FROM loom.user_ref_keys) k WHERE k.org = t.org;
UPDATE loom.memory_revisions t SET memory_key = encode(hmac(convert_to('loom.key:' || t.memory_key, 'UTF8'), k.key, 'sha256'), 'hex')
    FROM (SELECT org, loom.unwrapped_key(key) AS key FROM loom.user_ref_keys) k WHERE k.org = t.org;
