-- loom.shared, loom.decision_records and loom.category_links name a memory by
-- reference, as loom.memory_current does since migration 171: their memory_key (and
-- loom.shared's source_key) holds loom.key_ref(org, key), their agent and session_id
-- (loom.shared's source_agent and source_session_id) loom.agent_ref and
-- loom.session_ref (migration 172). Their primary keys, shared_by_source and the WAL's
-- records of them hold references only. Every statement binds the clear values through
-- those functions as init plans. What reads a clear value back takes it from sealed
-- text: the promoted row's head (loom.shared, by its key's reference and memory id), or
-- the caller's own identity (a decision's record and a key's category links are read
-- by the identity that names them). A decision's record names other memories' keys
-- (supersedes) and who decided (decided_by): both are sealed on the record's row
-- (sealed: AES-256-CBC under HMAC-SHA256(data_key, 'loom.decision'), as rowseal seals)
-- under a random data key of its own (data_key, wrapped under the KEK as every data
-- key is), deleted with the record; the columns keep '' and '{}'.

-- loom.session_ref of each of ss, in order, with the org's key unwrapped once (as
-- loom.key_refs): a read of several identities' rows binds it as (SELECT
-- loom.session_refs($org, $sessions)). NULL when the org has no key.
CREATE FUNCTION loom.session_refs(o text, ss text[]) RETURNS text[]
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT array_agg(CASE WHEN u.s IS NULL OR u.s IN ('', '-') THEN u.s
            ELSE encode(hmac(convert_to('loom.session:' || u.s, 'UTF8'), x.key, 'sha256'), 'hex') END ORDER BY u.i)
    FROM (SELECT loom.unwrapped_key(r.key) AS key FROM loom.user_ref_keys r WHERE r.org = o) x,
        unnest(ss) WITH ORDINALITY AS u(s, i)
$$;

-- Existing rows, in this one transaction, so no table is ever half keyed. An org
-- holding rows and no key yet gets one, stored raw (the at-rest pass wraps it), as
-- migrations 155 and 171 made them. The orgs' keys are unwrapped in the statement,
-- never kept in a table.
INSERT INTO loom.user_ref_keys (org, key)
    SELECT org, gen_random_bytes(32) FROM (SELECT DISTINCT org FROM loom.shared
        UNION SELECT DISTINCT org FROM loom.decision_records
        UNION SELECT DISTINCT org FROM loom.category_links) o
    ON CONFLICT (org) DO NOTHING;

UPDATE loom.shared t SET
    memory_key = encode(hmac(convert_to('loom.key:' || t.memory_key, 'UTF8'), k.key, 'sha256'), 'hex'),
    source_key = encode(hmac(convert_to('loom.key:' || t.source_key, 'UTF8'), k.key, 'sha256'), 'hex'),
    source_agent = CASE WHEN t.source_agent IN ('', '-') THEN t.source_agent
        ELSE encode(hmac(convert_to('loom.agent:' || t.source_agent, 'UTF8'), k.key, 'sha256'), 'hex') END,
    source_session_id = CASE WHEN t.source_session_id IN ('', '-') THEN t.source_session_id
        ELSE encode(hmac(convert_to('loom.session:' || t.source_session_id, 'UTF8'), k.key, 'sha256'), 'hex') END
    FROM (SELECT org, loom.unwrapped_key(key) AS key FROM loom.user_ref_keys) k WHERE k.org = t.org;

UPDATE loom.decision_records t SET
    memory_key = encode(hmac(convert_to('loom.key:' || t.memory_key, 'UTF8'), k.key, 'sha256'), 'hex'),
    agent = CASE WHEN t.agent IN ('', '-') THEN t.agent
        ELSE encode(hmac(convert_to('loom.agent:' || t.agent, 'UTF8'), k.key, 'sha256'), 'hex') END,
    session_id = CASE WHEN t.session_id IN ('', '-') THEN t.session_id
        ELSE encode(hmac(convert_to('loom.session:' || t.session_id, 'UTF8'), k.key, 'sha256'), 'hex') END
    FROM (SELECT org, loom.unwrapped_key(key) AS key FROM loom.user_ref_keys) k WHERE k.org = t.org;

UPDATE loom.category_links t SET
    memory_key = encode(hmac(convert_to('loom.key:' || t.memory_key, 'UTF8'), k.key, 'sha256'), 'hex'),
    agent = CASE WHEN t.agent IN ('', '-') THEN t.agent
        ELSE encode(hmac(convert_to('loom.agent:' || t.agent, 'UTF8'), k.key, 'sha256'), 'hex') END,
    session_id = CASE WHEN t.session_id IN ('', '-') THEN t.session_id
        ELSE encode(hmac(convert_to('loom.session:' || t.session_id, 'UTF8'), k.key, 'sha256'), 'hex') END
    FROM (SELECT org, loom.unwrapped_key(key) AS key FROM loom.user_ref_keys) k WHERE k.org = t.org;

ALTER TABLE loom.decision_records ADD COLUMN sealed bytea, ADD COLUMN data_key bytea;
-- A key made here is stored raw, as a key made before LOOM_KEK is: the at-rest pass
-- wraps it.
UPDATE loom.decision_records t SET data_key = x.key,
    sealed = encrypt(convert_to(jsonb_build_object('decided_by', t.decided_by, 'supersedes', to_jsonb(t.supersedes))::text, 'UTF8'),
        hmac('loom.decision'::bytea, x.key, 'sha256'), 'aes'),
    decided_by = '', supersedes = '{}'
    FROM (SELECT ctid AS tid, gen_random_bytes(32) AS key FROM loom.decision_records) x WHERE t.ctid = x.tid;
