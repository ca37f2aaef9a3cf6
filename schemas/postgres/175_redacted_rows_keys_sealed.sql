-- A redaction destroys a row's sealed text with its revision's data key; what the row
-- keeps of it, its memory's key and user (the columns hold their references since
-- migrations 155 and 171), is sealed again under a data key of the redaction's own,
-- random and wrapped under the KEK as every data key is, kept on each scrubbed
-- revision (redaction_key), so an erasure, deleting the revision, deletes it. A head
-- the redaction scrubbed is the revision at its seq, whose key it is sealed under.
-- The revision's topic key stays destroyed: loom.revision_keys never holds this one,
-- so the revision's record still opens under no stored key.
ALTER TABLE loom.memory_revisions ADD COLUMN redaction_key bytea;

-- loom.opened_row opens a redacted row's text under its redaction key: looked up only
-- when the revision's key is gone.
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
        SELECT v.redaction_key INTO key FROM loom.memory_revisions v WHERE v.org = o AND v.namespace = ns AND v.seq = s;
    END IF;
    IF key IS NULL THEN
        RETURN r;
    END IF;
    IF octet_length(key) <> 32 THEN
        key := loom.unwrapped_key(key);
    END IF;
    RETURN r || convert_from(decrypt(sealed, hmac('loom.row'::bytea, key, 'sha256'), 'aes'), 'UTF8')::jsonb;
END
$$;
