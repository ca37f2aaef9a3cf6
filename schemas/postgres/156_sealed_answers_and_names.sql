-- What still named a user in the clear in Postgres after migration 155, and the
-- answers that kept a write's content: each is now sealed under a data key of its
-- row's own (kek.NewKey: wrapped under the KEK like every data key), which the
-- row's erasure or expiry deletes with it, or names the user by reference. And the
-- users' names are sealed under keys the erasure destroys (below).
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

-- A user's name is sealed under a random key of the user's own (loom.user_names.key),
-- not under one derived from the org's key: an erasure deletes the name with its key,
-- so a copy of the sealed name in a dead tuple, the WAL or a backup opens for no one
-- once the key's own copies are gone, even for a holder of the KEK and the org's key
-- (which outlives every erasure). The key is made in the session that names the user
-- (loom.named_user runs inside every store's statement), and a session can make no
-- key the KEK wraps (it holds the KEK's decryption keys, not its MAC key: migration
-- 059), so it is stored wrapped under a key derived from the org's, itself wrapped
-- under the KEK: the same chain of custody, one link longer. (loom.user_key_wrap:
-- AES-256-CBC under HMAC-SHA256(org key, 'loom.user_key.wrap'), a random IV first.)
CREATE FUNCTION loom.user_key_wrap(o text) RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT hmac('loom.user_key.wrap'::bytea, loom.unwrapped_key(k.key), 'sha256') FROM loom.user_ref_keys k WHERE k.org = o
$$;

CREATE FUNCTION loom.wrapped_user_key(o text, k bytea) RETURNS bytea
LANGUAGE sql VOLATILE AS $$
    SELECT r.iv || encrypt_iv(k, loom.user_key_wrap(o), r.iv, 'aes-cbc/pad:none') FROM (SELECT gen_random_bytes(16) AS iv) r
$$;

CREATE FUNCTION loom.unwrapped_user_key(o text, w bytea) RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT decrypt_iv(substring(w FROM 17), loom.user_key_wrap(o), substring(w FOR 16), 'aes-cbc/pad:none')
$$;

-- The names kept so far, sealed again each under a fresh key of its own.
ALTER TABLE loom.user_names ADD COLUMN key bytea;
WITH fresh AS (
    SELECT org, user_ref, gen_random_bytes(32) AS k,
        decrypt(sealed, loom.user_name_key(org, user_ref), 'aes') AS name FROM loom.user_names)
UPDATE loom.user_names n SET key = loom.wrapped_user_key(f.org, f.k), sealed = encrypt(f.name, f.k, 'aes')
    FROM fresh f WHERE n.org = f.org AND n.user_ref = f.user_ref;
ALTER TABLE loom.user_names ALTER COLUMN key SET NOT NULL;

CREATE OR REPLACE FUNCTION loom.user_name(o text, ref text) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN ref IS NULL OR ref IN ('', '-') THEN ref
        ELSE coalesce((SELECT convert_from(decrypt(n.sealed, loom.unwrapped_user_key(o, n.key), 'aes'), 'UTF8')
                       FROM loom.user_names n WHERE n.org = o AND n.user_ref = ref), '') END
$$;

CREATE OR REPLACE FUNCTION loom.named_user(o text, u text) RETURNS text
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    ref text;
    k   bytea;
BEGIN
    IF u IS NULL OR u IN ('', '-') THEN
        RETURN u;
    END IF;
    ref := loom.user_ref(o, u);
    IF ref IS NULL THEN
        RAISE EXCEPTION 'loom: org % has no user reference key', o;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM loom.user_names n WHERE n.org = o AND n.user_ref = ref) THEN
        k := gen_random_bytes(32);
        INSERT INTO loom.user_names (org, user_ref, key, sealed)
        VALUES (o, ref, loom.wrapped_user_key(o, k), encrypt(convert_to(u, 'UTF8'), k, 'aes'))
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN ref;
END
$$;

-- The erasure ledger's sealed user had the same weakness (sealed under the org-derived
-- key, on a row the erasure keeps). Its saga and what follows it still resolve the
-- user after the user's name is gone (the ClickHouse step and the followers bind
-- cityHash64 of the id, a restore within the evidence window leaves the user's turns
-- out, the API answers it), so its key cannot go with the user's rows. Each saga
-- seals its user under a random key of its own (the scope's user_key, wrapped as a
-- user's key is): it goes with the ledger row, when the sweep deletes it
-- (LOOM_ERASURE_LEDGER_DAYS), and unlike the org-derived key, which opened every dead
-- copy of it for as long as the org lived.
CREATE OR REPLACE FUNCTION loom.ledger_scope(o text, scope jsonb) RETURNS jsonb
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    k bytea := gen_random_bytes(32);
BEGIN
    IF coalesce(scope->>'user_id', '') IN ('', '-') THEN
        RETURN scope;
    END IF;
    RETURN (scope - 'user_id') || jsonb_build_object('user_ref', loom.user_ref(o, scope->>'user_id'),
        'user_key', encode(loom.wrapped_user_key(o, k), 'hex'),
        'user_sealed', encode(encrypt(convert_to(scope->>'user_id', 'UTF8'), k, 'aes'), 'hex'));
END
$$;

CREATE OR REPLACE FUNCTION loom.ledger_user(o text, scope jsonb) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN scope ? 'user_key' THEN convert_from(decrypt(decode(scope->>'user_sealed', 'hex'),
            loom.unwrapped_user_key(o, decode(scope->>'user_key', 'hex')), 'aes'), 'UTF8')
        WHEN scope ? 'user_sealed' THEN convert_from(decrypt(decode(scope->>'user_sealed', 'hex'),
            loom.user_name_key(o, scope->>'user_ref'), 'aes'), 'UTF8')
        ELSE coalesce(scope->>'user_id', '') END
$$;

UPDATE loom.erasure_ledger SET scope = loom.ledger_scope(org,
        (scope - 'user_ref' - 'user_sealed') || jsonb_build_object('user_id', loom.ledger_user(org, scope)))
    WHERE scope ? 'user_sealed' AND NOT scope ? 'user_key';

-- Nothing is sealed under the org-derived key any more.
CREATE OR REPLACE FUNCTION loom.ledger_user(o text, scope jsonb) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN scope ? 'user_key' THEN convert_from(decrypt(decode(scope->>'user_sealed', 'hex'),
            loom.unwrapped_user_key(o, decode(scope->>'user_key', 'hex')), 'aes'), 'UTF8')
        ELSE coalesce(scope->>'user_id', '') END
$$;
DROP FUNCTION loom.user_name_key(text, text);

-- loom.api_tokens: a token bound to a user names it by reference (loom.user_name
-- opens it; internal/auth).
INSERT INTO loom.user_ref_keys (org, key)
    SELECT DISTINCT org, gen_random_bytes(32) FROM loom.api_tokens WHERE coalesce(read_user_id, '') NOT IN ('', '-')
    ON CONFLICT (org) DO NOTHING;
UPDATE loom.api_tokens SET read_user_id = loom.named_user(org, read_user_id) WHERE coalesce(read_user_id, '') NOT IN ('', '-');
