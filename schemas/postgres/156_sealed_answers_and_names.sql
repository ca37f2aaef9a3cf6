-- What still named a user in the clear in Postgres after migration 155, and the
-- answers that kept a write's content: each is now sealed under a data key of its
-- row's own (internal/rowseal, wrapped under the KEK like every data key), which the
-- row's erasure or expiry deletes with it, or names the user by reference.
--
-- loom.idempotency: a stored answer (the replayed response body) and a commit's
-- revisions (ids, keys, plain content hashes) are sealed under the key its claim made
-- (data_key); names keeps the memory and document ids they hold, for the erasure's
-- fence, which drops the key with the answer. Answers stored before stay readable
-- until they expire (24 hours).
ALTER TABLE loom.idempotency ADD COLUMN data_key bytea, ADD COLUMN sealed_answer bytea,
    ADD COLUMN sealed_revisions bytea, ADD COLUMN names text;

-- loom.search_pages: a parked search's plan (its request) and pool (identities) are
-- sealed under the row's key; the pool column keeps the scopes it names, the user by
-- reference, for the erasure's containment test. Pools parked before are dropped:
-- their tokens answer unknown, and the caller searches again.
ALTER TABLE loom.search_pages ADD COLUMN data_key bytea, ADD COLUMN sealed_plan bytea;
DELETE FROM loom.search_pages;

-- loom.search_traces: a kept trace is sealed under the row's key (trace holds '{}'),
-- its rows name users by reference. Traces kept before stay readable until they expire.
ALTER TABLE loom.search_traces ADD COLUMN data_key bytea, ADD COLUMN sealed bytea;

-- loom.api_tokens: a token bound to a user names it by reference (loom.user_name
-- opens it; internal/auth).
INSERT INTO loom.user_ref_keys (org, key)
    SELECT DISTINCT org, gen_random_bytes(32) FROM loom.api_tokens WHERE coalesce(read_user_id, '') NOT IN ('', '-')
    ON CONFLICT (org) DO NOTHING;
UPDATE loom.api_tokens SET read_user_id = loom.named_user(org, read_user_id) WHERE coalesce(read_user_id, '') NOT IN ('', '-');
