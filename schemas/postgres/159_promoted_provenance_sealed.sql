-- A promoted row stored before migration 155 keeps its provenance (`shared`: the
-- source's user id, agent, session, key and who promoted it) in its `row` JSON, in the
-- clear, until its next commit: heads.AtRest seals it with the row's text since. Each
-- moves into its row's sealed text here, as heads.AtRest puts it (loom.opened_row
-- merges it back, so reads answer it as before). A row stored before migration 056,
-- whose text is still in `row`, has its text sealed with it, as the at-rest pass
-- would. A row whose data key is gone (a redaction scrubbed it) loses it, as a
-- redacted row's sealed provenance goes with its key since.
WITH src AS (
    SELECT t.ctid AS tid, hmac('loom.row'::bytea, loom.unwrapped_key(k.data_key), 'sha256') AS row_key
    FROM loom.memory_current t
    JOIN loom.revision_keys k ON k.org = t.org AND k.namespace = t.namespace AND k.seq = t.seq
    WHERE t.row ? 'shared')
UPDATE loom.memory_current t SET
    sealed = encrypt(convert_to((CASE WHEN t.sealed IS NULL
            THEN (SELECT coalesce(jsonb_object_agg(e.key, e.value), '{}') FROM jsonb_each(t.row) e
                  WHERE e.key IN ('value', 'tags', 'entities', 'entity_types', 'relations'))
            ELSE convert_from(decrypt(t.sealed, src.row_key, 'aes'), 'UTF8')::jsonb END
        || jsonb_build_object('shared', t.row->'shared'))::text, 'UTF8'), src.row_key, 'aes'),
    row = CASE WHEN t.sealed IS NULL THEN t.row - ARRAY['value', 'tags', 'entities', 'entity_types', 'relations'] ELSE t.row END - 'shared'
FROM src WHERE t.ctid = src.tid;
UPDATE loom.memory_current SET row = row - 'shared' WHERE row ? 'shared';

WITH src AS (
    SELECT t.ctid AS tid, hmac('loom.row'::bytea, loom.unwrapped_key(k.data_key), 'sha256') AS row_key
    FROM loom.memory_revisions t
    JOIN loom.revision_keys k ON k.org = t.org AND k.namespace = t.namespace AND k.seq = t.seq
    WHERE t.row ? 'shared')
UPDATE loom.memory_revisions t SET
    sealed = encrypt(convert_to((CASE WHEN t.sealed IS NULL
            THEN (SELECT coalesce(jsonb_object_agg(e.key, e.value), '{}') FROM jsonb_each(t.row) e
                  WHERE e.key IN ('value', 'tags', 'entities', 'entity_types', 'relations'))
            ELSE convert_from(decrypt(t.sealed, src.row_key, 'aes'), 'UTF8')::jsonb END
        || jsonb_build_object('shared', t.row->'shared'))::text, 'UTF8'), src.row_key, 'aes'),
    row = CASE WHEN t.sealed IS NULL THEN t.row - ARRAY['value', 'tags', 'entities', 'entity_types', 'relations'] ELSE t.row END - 'shared'
FROM src WHERE t.ctid = src.tid;
UPDATE loom.memory_revisions SET row = row - 'shared' WHERE row ? 'shared';
