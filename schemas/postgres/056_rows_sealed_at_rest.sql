-- A memory's text at rest is sealed under its revision's data key, as the topic seals
-- it: the value, tags, entities, entity types and relations of memory_current.row and
-- memory_revisions.row move to their own column, `sealed`, AES-256-CBC (pgcrypto's
-- encrypt(..., 'aes')) under HMAC-SHA256(data_key, 'loom.row'), a key that seals this
-- one row's content and nothing else (so its zero IV is never reused). Destroying the
-- data key (an erasure, a redaction) then shreds the text in the table files, the WAL
-- and every backup, where deleting the row only left it in dead tuples and WAL records.
--
-- loom.opened_row gives back the whole row: a read selects it in place of `row`. A row
-- written before (sealed IS NULL) holds its text in `row` and is read as it is.
CREATE EXTENSION IF NOT EXISTS pgcrypto;

ALTER TABLE loom.memory_current ADD COLUMN sealed bytea;
ALTER TABLE loom.memory_revisions ADD COLUMN sealed bytea;

-- PL/pgSQL, not SQL: a SQL function with a subquery is not inlined, and Postgres plans
-- its body again at every execution of the statement calling it (0.6 ms a memory.get);
-- PL/pgSQL keeps the key lookup's plan for the session.
CREATE FUNCTION loom.opened_row(r jsonb, sealed bytea, o text, ns text, s bigint) RETURNS jsonb
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
    RETURN r || convert_from(decrypt(sealed, hmac('loom.row'::bytea, key, 'sha256'), 'aes'), 'UTF8')::jsonb;
END
$$;
