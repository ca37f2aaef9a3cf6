-- A deferred extraction request names its agent and session by reference
-- (loom.agent_ref, loom.session_ref): agent and session_id of loom.extraction_requests.
-- The clear values are sealed in who (JSON {"agent", "session"}, AES-256-CBC under
-- HMAC-SHA256(who_key, 'loom.request.who')) under a key of the row's own, wrapped under
-- the KEK: the status reads answer them after the request is done, when data_key and
-- payload are cleared, and an erasure deletes the row with its key.

ALTER TABLE loom.extraction_requests ADD COLUMN who_key bytea, ADD COLUMN who bytea;

-- A request's agent and session as JSON text, opened; NULL for a row without them.
CREATE FUNCTION loom.request_who(who bytea, who_key bytea) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT convert_from(decrypt(who, hmac('loom.request.who'::bytea, loom.unwrapped_key(who_key), 'sha256'), 'aes'), 'UTF8')
$$;

-- Existing rows, in this one transaction: each gets a key, stored raw as a key made
-- before LOOM_KEK is (the at-rest pass wraps it), its agent and session sealed under
-- it, and its columns rewritten (an org without a key gets one, as 155 made them).
INSERT INTO loom.user_ref_keys (org, key)
    SELECT DISTINCT org, gen_random_bytes(32) FROM loom.extraction_requests
    ON CONFLICT (org) DO NOTHING;

UPDATE loom.extraction_requests SET who_key = gen_random_bytes(32);
UPDATE loom.extraction_requests t SET
        who = encrypt(convert_to(json_build_object('agent', t.agent, 'session', t.session_id)::text, 'UTF8'),
            hmac('loom.request.who'::bytea, t.who_key, 'sha256'), 'aes'),
        agent = CASE WHEN t.agent IN ('', '-') THEN t.agent
            ELSE encode(hmac(convert_to('loom.agent:' || t.agent, 'UTF8'), o.key, 'sha256'), 'hex') END,
        session_id = CASE WHEN t.session_id IN ('', '-') THEN t.session_id
            ELSE encode(hmac(convert_to('loom.session:' || t.session_id, 'UTF8'), o.key, 'sha256'), 'hex') END
    FROM (SELECT org, loom.unwrapped_key(key) AS key FROM loom.user_ref_keys) o
    WHERE o.org = t.org;

ALTER TABLE loom.extraction_requests ALTER COLUMN who_key SET NOT NULL, ALTER COLUMN who SET NOT NULL;
