-- A memory row's agent and session are stored by their references in loom.memory_current
-- and loom.memory_revisions (their agent and session_id columns, and so
-- memory_current_pkey, memory_revisions_by_key and the WAL's records of them):
-- loom.agent_ref and loom.session_ref (migration 172), HMAC-SHA256 under the org's user
-- reference key; '' and '-' stay as they are. Both maps are one-to-one within an org, as
-- loom.key_ref is, so the primary key (org, namespace, agent, user_id, session_id,
-- memory_key) and memory_revisions_by_key still tell the same identities apart, and
-- every equality and join keeps its meaning; a scan ordered by the columns walks the
-- references' order. The clear agent and session live only in the row's sealed text
-- (heads.AtRest), which loom.opened_row merges over the row's JSON (jsonb's ||), as it
-- does the key. Rows written before this migration keep both in their row JSON (their
-- sealed text does not hold them), so they read as they did; a redaction's scrub writes
-- them back into the JSON, as it does the key (the sealed text goes).

-- Existing rows, in this one transaction, so no table is ever half referenced. An org
-- that holds rows and no key yet gets one, stored raw as a key made before LOOM_KEK is
-- (the at-rest pass wraps it), as migrations 155 and 171 made them. The orgs' keys are
-- unwrapped in the statement, never kept in a table.
INSERT INTO loom.user_ref_keys (org, key)
    SELECT org, gen_random_bytes(32) FROM (SELECT DISTINCT org FROM loom.memory_current
        UNION SELECT DISTINCT org FROM loom.memory_revisions) o
    ON CONFLICT (org) DO NOTHING;

UPDATE loom.memory_current t SET
    agent = CASE WHEN t.agent IN ('', '-') THEN t.agent
        ELSE encode(hmac(convert_to('loom.agent:' || t.agent, 'UTF8'), k.key, 'sha256'), 'hex') END,
    session_id = CASE WHEN t.session_id IN ('', '-') THEN t.session_id
        ELSE encode(hmac(convert_to('loom.session:' || t.session_id, 'UTF8'), k.key, 'sha256'), 'hex') END
    FROM (SELECT org, loom.unwrapped_key(key) AS key FROM loom.user_ref_keys) k
    WHERE k.org = t.org AND (t.agent NOT IN ('', '-') OR t.session_id NOT IN ('', '-'));
UPDATE loom.memory_revisions t SET
    agent = CASE WHEN t.agent IN ('', '-') THEN t.agent
        ELSE encode(hmac(convert_to('loom.agent:' || t.agent, 'UTF8'), k.key, 'sha256'), 'hex') END,
    session_id = CASE WHEN t.session_id IN ('', '-') THEN t.session_id
        ELSE encode(hmac(convert_to('loom.session:' || t.session_id, 'UTF8'), k.key, 'sha256'), 'hex') END
    FROM (SELECT org, loom.unwrapped_key(key) AS key FROM loom.user_ref_keys) k
    WHERE k.org = t.org AND (t.agent NOT IN ('', '-') OR t.session_id NOT IN ('', '-'));
