-- A user's key (loom.user_names.key) and an erasure saga's (the ledger scope's
-- user_key) are wrapped under a key of the org's own, its name wrap key, instead of
-- one derived from the org's user reference key (loom.user_key_wrap, migration 156).
-- The org's key outlives every erasure and every KEK rotation, so it opened the
-- wrapped key that travels with each copy of an erased user's sealed name (a dead
-- tuple, the WAL, a backup). The name wrap key is made in Go (internal/userref, with
-- the org's user reference key) and stored wrapped under the KEK, and the at-rest pass
-- replaces it when the KEK is rotated (internal/atrest): a fresh key, every live
-- user's key and ledger key wrapped again under it, the old one dropped. A kept copy
-- of an erased user's name then needs the old name wrap key, whose own kept copies
-- are wrapped under the old KEK: once that is destroyed nothing opens them.
--
-- gen counts an org's name wrap keys; each wrapped key names the one it is under
-- (loom.user_names.wrap, the scope's user_wrap), 0 for the org-derived key of
-- migration 156 (rows written before, or by a session that found no name wrap key:
-- the at-rest pass wraps them again). While a rotation's pass wraps them again, the
-- key it replaced is kept as retired.
CREATE TABLE loom.name_wrap_keys (
    org         text        PRIMARY KEY,
    gen         int         NOT NULL CHECK (gen > 0),
    key         bytea       NOT NULL CHECK (octet_length(key) IN (32, 89)),
    retired_gen int,
    retired     bytea       CHECK (retired IS NULL OR octet_length(retired) IN (32, 89)),
    renewed_at  timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE loom.user_names ADD COLUMN wrap int NOT NULL DEFAULT 0;

-- The name wrap key of generation g of org o, unwrapped (NULL when the org holds no
-- such key: a key wrapped under it opens to nothing).
CREATE FUNCTION loom.name_wrap(o text, g int) RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN g = 0 THEN loom.user_key_wrap(o)
        ELSE (SELECT loom.unwrapped_key(CASE g WHEN w.gen THEN w.key WHEN w.retired_gen THEN w.retired END)
              FROM loom.name_wrap_keys w WHERE w.org = o) END
$$;

-- The org's current name wrap key, unwrapped, and its generation, for a key about to
-- be wrapped under it. The row is locked until the transaction ends: a rotation's
-- swap (internal/atrest) waits for it, so every key wrapped under the old generation
-- is committed, and seen by the pass, before the swap is.
CREATE FUNCTION loom.locked_name_wrap(o text, OUT g int, OUT wk bytea)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    SELECT w.gen, loom.unwrapped_key(w.key) INTO g, wk FROM loom.name_wrap_keys w WHERE w.org = o FOR SHARE;
    IF NOT FOUND THEN
        g := 0;
        wk := loom.user_key_wrap(o);
    END IF;
END
$$;

-- k wrapped under the name wrap key wk: AES-256-CBC, a random IV first.
CREATE FUNCTION loom.wrapped_under(k bytea, wk bytea) RETURNS bytea
LANGUAGE sql VOLATILE AS $$
    SELECT r.iv || encrypt_iv(k, wk, r.iv, 'aes-cbc/pad:none') FROM (SELECT gen_random_bytes(16) AS iv) r
$$;

CREATE FUNCTION loom.unwrapped_user_key(o text, w bytea, g int) RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT decrypt_iv(substring(w FROM 17), loom.name_wrap(o, g), substring(w FOR 16), 'aes-cbc/pad:none')
$$;

CREATE OR REPLACE FUNCTION loom.user_name(o text, ref text) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN ref IS NULL OR ref IN ('', '-') THEN ref
        ELSE coalesce((SELECT convert_from(decrypt(n.sealed, loom.unwrapped_user_key(o, n.key, n.wrap), 'aes'), 'UTF8')
                       FROM loom.user_names n WHERE n.org = o AND n.user_ref = ref), '') END
$$;

CREATE OR REPLACE FUNCTION loom.named_user(o text, u text) RETURNS text
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    ref text;
    k   bytea;
    w   record;
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
        SELECT * INTO w FROM loom.locked_name_wrap(o);
        INSERT INTO loom.user_names (org, user_ref, key, wrap, sealed)
        VALUES (o, ref, loom.wrapped_under(k, w.wk), w.g, encrypt(convert_to(u, 'UTF8'), k, 'aes'))
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN ref;
END
$$;

-- The ledger's saga key likewise; user_wrap names its generation (absent: 0).
CREATE OR REPLACE FUNCTION loom.ledger_scope(o text, scope jsonb) RETURNS jsonb
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    k bytea := gen_random_bytes(32);
    w record;
BEGIN
    IF coalesce(scope->>'user_id', '') IN ('', '-') THEN
        RETURN scope;
    END IF;
    SELECT * INTO w FROM loom.locked_name_wrap(o);
    RETURN (scope - 'user_id') || jsonb_build_object('user_ref', loom.user_ref(o, scope->>'user_id'),
        'user_key', encode(loom.wrapped_under(k, w.wk), 'hex'), 'user_wrap', w.g,
        'user_sealed', encode(encrypt(convert_to(scope->>'user_id', 'UTF8'), k, 'aes'), 'hex'));
END
$$;

CREATE OR REPLACE FUNCTION loom.ledger_user(o text, scope jsonb) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN scope ? 'user_key' THEN convert_from(decrypt(decode(scope->>'user_sealed', 'hex'),
            loom.unwrapped_user_key(o, decode(scope->>'user_key', 'hex'), coalesce((scope->>'user_wrap')::int, 0)), 'aes'), 'UTF8')
        ELSE coalesce(scope->>'user_id', '') END
$$;

-- Whether this session can open a stored key (raw, or wrapped under a KEK it was
-- given), so the at-rest pass leaves, rather than fails on, a key it cannot open.
CREATE FUNCTION loom.opens(k bytea) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT k IS NOT NULL AND (octet_length(k) = 32 OR (octet_length(k) = 89 AND get_byte(k, 0) = 1
        AND strpos(coalesce(current_setting('loom.kek', true), ''), encode(substring(k FROM 2 FOR 8), 'hex') || ':') > 0))
$$;

-- Whether this session can open org o's name wrap key of generation g.
CREATE FUNCTION loom.name_wrap_opens(o text, g int) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT coalesce(CASE WHEN g = 0 THEN (SELECT loom.opens(k.key) FROM loom.user_ref_keys k WHERE k.org = o)
        ELSE (SELECT loom.opens(CASE g WHEN w.gen THEN w.key WHEN w.retired_gen THEN w.retired END)
              FROM loom.name_wrap_keys w WHERE w.org = o) END, false)
$$;
