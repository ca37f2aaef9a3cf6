-- The content hash Postgres keeps is keyed. Until here memory_current.content_sha256
-- and memory_revisions.content_sha256 (and the row's JSON, the journal's audit, the
-- workers' queue) held the plain SHA-256 of a value: after an erasure its dead tuples,
-- the WAL and every backup kept it, and a dictionary of guesses confirmed an erased
-- value. Now the columns hold HMAC-SHA256 of that digest (its 64 hex characters) under
-- HMAC-SHA256(data key, 'loom.content'), the data key being the scope's: one per org,
-- namespace and user (user_id '' for rows of no user), made on the scope's first write,
-- stored wrapped under the KEK like every data key, deleted by an erasure of the scope.
-- The same value in the same scope hashes alike, so lookups and comparisons by content
-- keep their meaning there; once the key is gone, nothing links a stored hash to a value.
-- The plain digest, which the API answers and preconditions compare, moves into the
-- row's sealed text (loom.opened_row gives it back), under the revision's key.
--
-- Rows written before keep the plain digest (in the column and in `row`) until the
-- at-rest pass (internal/atrest) rehashes them; lookups match either meanwhile.
CREATE TABLE loom.content_keys (
    org        text        NOT NULL,
    namespace  text        NOT NULL,
    user_id    text        NOT NULL,
    key        bytea       NOT NULL CHECK (octet_length(key) IN (32, 89)),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org, namespace, user_id)
);

-- The keyed hash of a plain digest (64 lowercase hex) in a scope; NULL when the scope
-- has no key (it holds no row, or an erasure destroyed it).
CREATE FUNCTION loom.content_hash(o text, ns text, u text, sha text) RETURNS text
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
DECLARE
    key bytea;
BEGIN
    SELECT k.key INTO key FROM loom.content_keys k WHERE k.org = o AND k.namespace = ns AND k.user_id = u;
    IF key IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN encode(hmac(convert_to(sha, 'UTF8'), hmac('loom.content'::bytea, loom.unwrapped_key(key), 'sha256'), 'sha256'), 'hex');
END
$$;
