-- Every column that names a user holds its reference, not its id: the topic's
-- user_ref (events.UserRef: HMAC-SHA256 of the id under the org's key in
-- loom.user_ref_keys, lowercase hex), the same value in every table, so joins and
-- equality predicates keep their meaning. '' and '-' name no one and stay as they are.
-- The clear id lives only in sealed text: a memory row's (heads.AtRest) and the org's
-- name of each user (loom.user_names, sealed under a key derived from the org's key
-- for that user alone), which the reads that answer a user from a table that holds
-- only the reference open with loom.user_name. An erasure deletes the user's rows and
-- names; what the dead tuples and the WAL keep is the reference, which confirms a
-- guessed id only to someone holding the KEK.
--
-- loom.user_ref is the one boundary: a store binds the clear id through it (and
-- loom.named_user, its writing form, which keeps the user's name too). It reads the
-- org's key as loom.opened_row reads a revision's, in the session, which Loom gives
-- the KEK's decryption keys (migration 059).

-- The stored form of a user id in org o: NULL when the org has no key yet (then no row
-- names any of its users, so an equality with it matches nothing).
CREATE FUNCTION loom.user_ref(o text, u text) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN u IS NULL OR u IN ('', '-') THEN u
        ELSE (SELECT encode(hmac(convert_to(u, 'UTF8'), loom.unwrapped_key(k.key), 'sha256'), 'hex')
              FROM loom.user_ref_keys k WHERE k.org = o) END
$$;

-- The users' names: the clear id sealed under HMAC-SHA256(org key, 'loom.user_name:' ||
-- reference), a key of its own per user (pgcrypto's AES-256-CBC, zero IV: one
-- plaintext per key).
CREATE TABLE loom.user_names (
    org        text        NOT NULL,
    user_ref   text        NOT NULL,
    sealed     bytea       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org, user_ref)
);

CREATE FUNCTION loom.user_name_key(o text, ref text) RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT hmac(convert_to('loom.user_name:' || ref, 'UTF8'), loom.unwrapped_key(k.key), 'sha256')
    FROM loom.user_ref_keys k WHERE k.org = o
$$;

-- The clear id a stored reference names; '' and '-' as they are; '' for a reference
-- whose name is gone (erased).
CREATE FUNCTION loom.user_name(o text, ref text) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN ref IS NULL OR ref IN ('', '-') THEN ref
        ELSE coalesce((SELECT convert_from(decrypt(n.sealed, loom.user_name_key(o, ref), 'aes'), 'UTF8')
                       FROM loom.user_names n WHERE n.org = o AND n.user_ref = ref), '') END
$$;

-- loom.user_ref for a writer: keeps the user's name as well (once), so the reads that
-- answer the user from a reference find it. Fails when the org has no key: the write
-- paths make it first (internal/userref).
CREATE FUNCTION loom.named_user(o text, u text) RETURNS text
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    ref text;
BEGIN
    IF u IS NULL OR u IN ('', '-') THEN
        RETURN u;
    END IF;
    ref := loom.user_ref(o, u);
    IF ref IS NULL THEN
        RAISE EXCEPTION 'loom: org % has no user reference key', o;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM loom.user_names n WHERE n.org = o AND n.user_ref = ref) THEN
        INSERT INTO loom.user_names (org, user_ref, sealed)
        VALUES (o, ref, encrypt(convert_to(u, 'UTF8'), loom.user_name_key(o, ref), 'aes'))
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN ref;
END
$$;

-- A memory row opened with its user: the sealed text names the user (heads.AtRest);
-- a row sealed before, or whose text a redaction dropped, is named by its column.
CREATE FUNCTION loom.opened_row(r jsonb, sealed bytea, o text, ns text, s bigint, u text) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN coalesce(x.row->>'user_id', '') = '' AND u NOT IN ('', '-')
        THEN x.row || jsonb_build_object('user_id', loom.user_name(o, u)) ELSE x.row END
    FROM (SELECT loom.opened_row(r, sealed, o, ns, s) AS row) x
$$;

-- Existing rows. The orgs that name users and have no key yet get one, stored raw as
-- a key made before LOOM_KEK is (the at-rest pass wraps it); then every user column is
-- rewritten in this one transaction, so no table is ever half keyed, and a memory row's
-- `row` JSON drops its clear user_id (its reads take it from loom.user_names).
CREATE TEMPORARY TABLE user_ref_rewrite_users ON COMMIT DROP AS
    SELECT org, user_id AS u FROM loom.memory_current
    UNION SELECT org, user_id FROM loom.memory_revisions
    UNION SELECT org, user_id FROM loom.extraction_requests
    UNION SELECT org, read_user_id FROM loom.extraction_requests
    UNION SELECT org, user_id FROM loom.worker_items
    UNION SELECT org, user_id FROM loom.entity_aliases
    UNION SELECT org, user_id FROM loom.search_traces
    UNION SELECT org, user_id FROM loom.memory_evidence
    UNION SELECT org, user_id FROM loom.memory_belief_sources
    UNION SELECT org, user_id FROM loom.session_summaries
    UNION SELECT org, user_id FROM loom.consolidation_runs
    UNION SELECT org, source_user_id FROM loom.shared
    UNION SELECT org, user_id FROM loom.decision_records
    UNION SELECT org, user_id FROM loom.content_keys
    UNION SELECT org, user_id FROM loom.memory_chunks
    UNION SELECT org, user_id FROM loom.memory_chunk_sources
    UNION SELECT org, user_id FROM loom.category_links
    UNION SELECT org, user_id FROM loom.learnings_supporters
    UNION SELECT org, user_id FROM loom.session_outcomes
    UNION SELECT org, unnest(user_ids) FROM loom.conflict_allowlist
    UNION SELECT org, user_id FROM loom.read_audit;
DELETE FROM user_ref_rewrite_users WHERE u IS NULL OR u IN ('', '-');

INSERT INTO loom.user_ref_keys (org, key)
    SELECT DISTINCT org, gen_random_bytes(32) FROM user_ref_rewrite_users
    ON CONFLICT (org) DO NOTHING;

INSERT INTO loom.user_names (org, user_ref, sealed)
    SELECT org, loom.user_ref(org, u), encrypt(convert_to(u, 'UTF8'), loom.user_name_key(org, loom.user_ref(org, u)), 'aes')
    FROM user_ref_rewrite_users
    ON CONFLICT DO NOTHING;

UPDATE loom.memory_current SET user_id = loom.user_ref(org, user_id), row = jsonb_set(row, '{user_id}', '""')
    WHERE user_id NOT IN ('', '-');
UPDATE loom.memory_revisions SET user_id = loom.user_ref(org, user_id), row = jsonb_set(row, '{user_id}', '""')
    WHERE user_id NOT IN ('', '-');
UPDATE loom.extraction_requests SET user_id = loom.user_ref(org, user_id), read_user_id = loom.user_ref(org, read_user_id)
    WHERE user_id NOT IN ('', '-') OR read_user_id NOT IN ('', '-');
UPDATE loom.worker_items SET user_id = loom.user_ref(org, user_id) WHERE user_id NOT IN ('', '-');
UPDATE loom.entity_aliases SET user_id = loom.user_ref(org, user_id) WHERE user_id NOT IN ('', '-');
UPDATE loom.search_traces SET user_id = loom.user_ref(org, user_id) WHERE user_id NOT IN ('', '-');
UPDATE loom.memory_evidence SET user_id = loom.user_ref(org, user_id) WHERE user_id NOT IN ('', '-');
UPDATE loom.memory_belief_sources SET user_id = loom.user_ref(org, user_id) WHERE user_id NOT IN ('', '-');
UPDATE loom.session_summaries SET user_id = loom.user_ref(org, user_id) WHERE user_id NOT IN ('', '-');
UPDATE loom.consolidation_runs SET user_id = loom.user_ref(org, user_id) WHERE user_id NOT IN ('', '-');
UPDATE loom.shared SET source_user_id = loom.user_ref(org, source_user_id) WHERE source_user_id NOT IN ('', '-');
UPDATE loom.decision_records SET user_id = loom.user_ref(org, user_id) WHERE user_id NOT IN ('', '-');
UPDATE loom.content_keys SET user_id = loom.user_ref(org, user_id) WHERE user_id NOT IN ('', '-');
UPDATE loom.memory_chunks SET user_id = loom.user_ref(org, user_id) WHERE user_id NOT IN ('', '-');
UPDATE loom.memory_chunk_sources SET user_id = loom.user_ref(org, user_id) WHERE user_id NOT IN ('', '-');
UPDATE loom.category_links SET user_id = loom.user_ref(org, user_id) WHERE user_id NOT IN ('', '-');
UPDATE loom.learnings_supporters SET user_id = loom.user_ref(org, user_id) WHERE user_id NOT IN ('', '-');
UPDATE loom.session_outcomes SET user_id = loom.user_ref(org, user_id) WHERE user_id NOT IN ('', '-');
UPDATE loom.read_audit SET user_id = loom.user_ref(org, user_id) WHERE user_id NOT IN ('', '-');
UPDATE loom.conflict_allowlist SET user_ids = ARRAY(SELECT loom.user_ref(org, u) FROM unnest(user_ids) AS u)
    WHERE user_ids <> '{}';
-- The erasure ledger's scope names its user by reference (user_ref), and keeps the id
-- sealed (user_sealed, hex) as loom.user_names does, for what resolves the user of an
-- erasure after the user's rows and names are gone: the saga's ClickHouse step and the
-- followers (cityHash64 of the id), the API's answer. A scope written before names it
-- in the clear (user_id) until this migration rewrites it.
CREATE FUNCTION loom.ledger_scope(o text, scope jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN coalesce(scope->>'user_id', '') IN ('', '-') THEN scope
        ELSE (scope - 'user_id') || jsonb_build_object('user_ref', loom.user_ref(o, scope->>'user_id'),
            'user_sealed', encode(encrypt(convert_to(scope->>'user_id', 'UTF8'),
                loom.user_name_key(o, loom.user_ref(o, scope->>'user_id')), 'aes'), 'hex')) END
$$;

-- The clear user id of a ledger scope ('' for a namespace's erasure).
CREATE FUNCTION loom.ledger_user(o text, scope jsonb) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN scope ? 'user_sealed' THEN convert_from(decrypt(decode(scope->>'user_sealed', 'hex'),
            loom.user_name_key(o, scope->>'user_ref'), 'aes'), 'UTF8')
        ELSE coalesce(scope->>'user_id', '') END
$$;

INSERT INTO loom.user_ref_keys (org, key)
    SELECT DISTINCT org, gen_random_bytes(32) FROM loom.erasure_ledger WHERE coalesce(scope->>'user_id', '') NOT IN ('', '-')
    ON CONFLICT (org) DO NOTHING;
UPDATE loom.erasure_ledger SET scope = loom.ledger_scope(org, scope) WHERE coalesce(scope->>'user_id', '') NOT IN ('', '-');
