-- A session-bound token's session (the own_session scope, migration 092) is sealed
-- instead of stored in the clear: read_session holds a random IV and, after it, the
-- session id (prefixed 'loom.token.session:', so a wrong key is told from a right one)
-- AES-256-CBC under HMAC-SHA256(key, 'loom.token.session'). The key is
--   * for a token bound to a user, the user's name key (loom.user_names.key, which
--     migration 158 wraps under the org's name wrap key): the user's erasure deletes
--     it with the name, so the session opens for no one after it, in the table, the
--     WAL or a backup, as the name does;
--   * for a token bound to a session alone, a key of the token's own
--     (read_session_key, wrapped under the KEK; the at-rest pass wraps it again at a
--     rotation). No user's erasure reaches such a token: its key lives as long as the
--     token's row.
-- Several tokens of a user seal under the user's one key, hence the random IV. No
-- lookup reads tokens by their session, so the clear column goes and keeps no
-- reference in its place; a process of before, which would read a missing session as
-- "every session", fails on the missing column instead.

ALTER TABLE loom.api_tokens ADD COLUMN read_session bytea, ADD COLUMN read_session_key bytea;

-- The key a token's session is sealed under: its own key k (wrapped under the KEK)
-- when it has one, else its user's name key (u is the user's reference); NULL once the
-- user's name is erased.
CREATE FUNCTION loom.token_session_key(o text, u text, k bytea) RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT hmac('loom.token.session'::bytea, CASE WHEN k IS NOT NULL THEN loom.unwrapped_key(k)
        ELSE (SELECT loom.unwrapped_user_key(o, n.key, n.wrap) FROM loom.user_names n WHERE n.org = o AND n.user_ref = u) END, 'sha256')
$$;

-- s sealed under sk (a key loom.token_session_key derives).
CREATE FUNCTION loom.sealed_token_session(s text, sk bytea) RETURNS bytea
LANGUAGE sql VOLATILE AS $$
    SELECT r.iv || encrypt_iv(convert_to('loom.token.session:' || s, 'UTF8'), sk, r.iv, 'aes')
    FROM (SELECT gen_random_bytes(16) AS iv) r
$$;

-- A token's session opened: NULL for a token bound to no session, '' for one whose key
-- is gone (its user erased) or does not open it (the user erased and named again: a
-- fresh key).
CREATE FUNCTION loom.token_session(o text, u text, sealed bytea, k bytea) RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    sk    bytea;
    plain text;
BEGIN
    IF sealed IS NULL THEN
        RETURN NULL;
    END IF;
    sk := loom.token_session_key(o, u, k);
    IF sk IS NULL OR octet_length(sealed) < 32 THEN
        RETURN '';
    END IF;
    BEGIN
        plain := convert_from(decrypt_iv(substring(sealed FROM 17), sk, substring(sealed FOR 16), 'aes'), 'UTF8');
    EXCEPTION WHEN external_routine_invocation_exception OR character_not_in_repertoire OR untranslatable_character THEN
        RETURN '';
    END;
    IF left(plain, 19) <> 'loom.token.session:' THEN
        RETURN '';
    END IF;
    RETURN substring(plain FROM 20);
END
$$;

-- A new token's binding as stored: its user's reference (loom.named_user, which makes
-- the user's name key) and its session s sealed (NULL for none) under the user's key,
-- or under k, the token's own key, for a token bound to no user.
CREATE FUNCTION loom.token_binding(o text, u text, s text, k bytea, OUT user_ref text, OUT session bytea)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    user_ref := loom.named_user(o, u);
    IF coalesce(s, '') = '' THEN
        RETURN;
    END IF;
    session := loom.sealed_token_session(s, loom.token_session_key(o, user_ref, k));
    IF session IS NULL THEN
        RAISE EXCEPTION 'loom: no key to seal the session of a token of org % under', o;
    END IF;
END
$$;

-- Existing tokens, in this one transaction. A token bound to no user gets a key of its
-- own, stored raw as a key made before LOOM_KEK is (the at-rest pass wraps it). A token
-- whose user was erased before the upgrade has no key left to seal under: its session
-- is stored empty, which opens to nothing, as it would have after the erasure.
UPDATE loom.api_tokens t SET read_session_key = x.k,
        read_session = coalesce(loom.sealed_token_session(t.read_session_id, loom.token_session_key(t.org, t.read_user_id, x.k)), ''::bytea),
        read_session_id = NULL
    FROM (SELECT token_id, CASE WHEN coalesce(read_user_id, '') IN ('', '-') THEN gen_random_bytes(32) END AS k
          FROM loom.api_tokens WHERE coalesce(read_session_id, '') <> '') x
    WHERE t.token_id = x.token_id;
ALTER TABLE loom.api_tokens DROP COLUMN read_session_id;
