-- The data keys are stored wrapped under the deployment's key-encryption key
-- (LOOM_KEK, internal/kek): a revision's key, an org's user reference key and a
-- deferred extraction's key. A wrapped key is 89 bytes: format 1, the KEK's id (8),
-- an IV (16), the key AES-256-CBC without padding under a key derived from the KEK
-- (32), and an HMAC-SHA256 over the rest under another (32). A 32-byte key is one
-- stored before: it is used as it is until the at-rest pass wraps it.
--
-- Each Loom session is given, as the setting loom.kek, the derived decryption key of
-- every configured KEK by id ("id:key" in hex, comma separated); loom.unwrapped_key
-- opens a key with it, so loom.opened_row and the erasure's scopes read rows as before.
-- The MAC is Loom's to check (internal/kek), the session holds no key that makes one.
ALTER TABLE loom.revision_keys DROP CONSTRAINT revision_keys_data_key_check,
    ADD CONSTRAINT revision_keys_data_key_check CHECK (octet_length(data_key) IN (32, 89)) NOT VALID;
ALTER TABLE loom.revision_keys VALIDATE CONSTRAINT revision_keys_data_key_check;
ALTER TABLE loom.user_ref_keys DROP CONSTRAINT user_ref_keys_key_check,
    ADD CONSTRAINT user_ref_keys_key_check CHECK (octet_length(key) IN (32, 89)) NOT VALID;
ALTER TABLE loom.user_ref_keys VALIDATE CONSTRAINT user_ref_keys_key_check;
ALTER TABLE loom.extraction_requests DROP CONSTRAINT extraction_requests_data_key_check,
    ADD CONSTRAINT extraction_requests_data_key_check CHECK (data_key IS NULL OR octet_length(data_key) IN (32, 89)) NOT VALID;
ALTER TABLE loom.extraction_requests VALIDATE CONSTRAINT extraction_requests_data_key_check;

CREATE FUNCTION loom.unwrapped_key(k bytea) RETURNS bytea
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
DECLARE
    ring text;
    at   int;
BEGIN
    IF k IS NULL OR octet_length(k) = 32 THEN
        RETURN k;
    END IF;
    IF octet_length(k) <> 89 OR get_byte(k, 0) <> 1 THEN
        RAISE EXCEPTION 'loom: a stored data key of % bytes is in no known format', octet_length(k);
    END IF;
    ring := coalesce(current_setting('loom.kek', true), '');
    at := strpos(ring, encode(substring(k FROM 2 FOR 8), 'hex') || ':');
    IF at = 0 THEN
        RAISE EXCEPTION 'loom: a data key is wrapped under a key-encryption key this session was not given'
            USING HINT = 'Configure the KEK it was wrapped under in LOOM_KEK (a rotation lists the new KEK first, then the old).';
    END IF;
    RETURN decrypt_iv(substring(k FROM 26 FOR 32), decode(substring(ring FROM at + 17 FOR 64), 'hex'),
        substring(k FROM 10 FOR 16), 'aes-cbc/pad:none');
END
$$;

CREATE OR REPLACE FUNCTION loom.opened_row(r jsonb, sealed bytea, o text, ns text, s bigint) RETURNS jsonb
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
DECLARE
    key bytea;
BEGIN
    IF sealed IS NULL THEN
        RETURN r;
    END IF;
    SELECT k.data_key INTO key FROM loom.revision_keys k WHERE k.org = o AND k.namespace = ns AND k.seq = s;
    IF key IS NULL THEN
        RETURN r;
    END IF;
    IF octet_length(key) <> 32 THEN
        key := loom.unwrapped_key(key);
    END IF;
    RETURN r || convert_from(decrypt(sealed, hmac('loom.row'::bytea, key, 'sha256'), 'aes'), 'UTF8')::jsonb;
END
$$;
