-- The conversation's record and the tables beside it name their agent and session by
-- reference (loom.agent_ref, loom.session_ref, migration 172): agent and session_id of
-- loom.memory_evidence (and so memory_evidence_session_turns,
-- memory_evidence_uncrystallized and the WAL's records of them), loom.memory_chunks,
-- loom.session_summaries (its primary key), loom.session_outcomes (its primary key),
-- loom.learnings_queue and loom.learnings_supporters (its primary key), and
-- loom.search_traces (the session a search was narrowed to). Equalities and
-- joins between them keep their meaning; an ORDER BY of the columns groups as before,
-- in the references' order. The clear values live only in each row's sealed text
-- (internal/evidence, internal/learnings), which reads open: a turn's {"agent",
-- "session", "text", "speaker"}, a chunk's {"agent", "session", "text"}, a digest's
-- {"session", "text"}, a rule's and a supporter's {"agent", "session", "text"}. A
-- session's outcome keeps no text: the pass takes the session from its turns.
--
-- Existing rows, in this one transaction, so no table is ever half keyed: each row's
-- text is sealed again with its agent and session (under the same key: its label's
-- key under the row's data key, the new text leading with the agent, so the two
-- sealed texts share no block under the fixed IV), and the columns are rewritten. An
-- org with rows and no key gets one, stored raw as migration 155 made them (the
-- at-rest pass wraps it). The orgs' keys are unwrapped in the statement, never kept
-- in a table; each row's data key is unwrapped once.

INSERT INTO loom.user_ref_keys (org, key)
    SELECT org, gen_random_bytes(32) FROM (SELECT DISTINCT org FROM loom.memory_evidence
        UNION SELECT DISTINCT org FROM loom.memory_chunks
        UNION SELECT DISTINCT org FROM loom.session_summaries
        UNION SELECT DISTINCT org FROM loom.session_outcomes
        UNION SELECT DISTINCT org FROM loom.learnings_queue
        UNION SELECT DISTINCT org FROM loom.learnings_supporters
        UNION SELECT DISTINCT org FROM loom.search_traces WHERE session_id NOT IN ('', '-')) o
    ON CONFLICT (org) DO NOTHING;

-- The reference of v under prefix ('loom.agent:', 'loom.session:') and an org's
-- unwrapped key k, as loom.agent_ref and loom.session_ref compute it.
CREATE FUNCTION pg_temp.writer_ref(prefix text, v text, k bytea) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN v IN ('', '-') THEN v ELSE encode(hmac(convert_to(prefix || v, 'UTF8'), k, 'sha256'), 'hex') END
$$;

-- The leading fields of a sealed text: agent and session as JSON members.
CREATE FUNCTION pg_temp.writer_fields(a text, s text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT '"agent":' || to_json(a)::text || ',"session":' || to_json(s)::text
$$;

UPDATE loom.memory_evidence t SET
        sealed = encrypt(convert_to('{' || pg_temp.writer_fields(t.agent, t.session_id) || ','
            || substr(convert_from(decrypt(t.sealed, x.k, 'aes'), 'UTF8'), 2), 'UTF8'), x.k, 'aes'),
        agent = pg_temp.writer_ref('loom.agent:', t.agent, o.key),
        session_id = pg_temp.writer_ref('loom.session:', t.session_id, o.key)
    FROM (SELECT org, namespace, turn_id, hmac('loom.turn'::bytea, loom.unwrapped_key(data_key), 'sha256') AS k
            FROM loom.memory_evidence) x,
        (SELECT org, loom.unwrapped_key(key) AS key FROM loom.user_ref_keys) o
    WHERE x.org = t.org AND x.namespace = t.namespace AND x.turn_id = t.turn_id AND o.org = t.org;

UPDATE loom.memory_chunks t SET
        sealed = encrypt(convert_to('{' || pg_temp.writer_fields(t.agent, t.session_id) || ',"text":'
            || to_json(convert_from(decrypt(t.sealed, x.k, 'aes'), 'UTF8'))::text || '}', 'UTF8'), x.k, 'aes'),
        agent = pg_temp.writer_ref('loom.agent:', t.agent, o.key),
        session_id = pg_temp.writer_ref('loom.session:', t.session_id, o.key)
    FROM (SELECT org, namespace, chunk_id, hmac('loom.chunk'::bytea, loom.unwrapped_key(data_key), 'sha256') AS k
            FROM loom.memory_chunks) x,
        (SELECT org, loom.unwrapped_key(key) AS key FROM loom.user_ref_keys) o
    WHERE x.org = t.org AND x.namespace = t.namespace AND x.chunk_id = t.chunk_id AND o.org = t.org;

UPDATE loom.session_summaries t SET
        sealed = encrypt(convert_to('{"session":' || to_json(t.session_id)::text || ',"text":'
            || to_json(convert_from(decrypt(t.sealed, x.k, 'aes'), 'UTF8'))::text || '}', 'UTF8'), x.k, 'aes'),
        session_id = pg_temp.writer_ref('loom.session:', t.session_id, o.key)
    FROM (SELECT org, namespace, user_id, session_id, window_end,
                hmac('loom.digest'::bytea, loom.unwrapped_key(data_key), 'sha256') AS k
            FROM loom.session_summaries) x,
        (SELECT org, loom.unwrapped_key(key) AS key FROM loom.user_ref_keys) o
    WHERE x.org = t.org AND x.namespace = t.namespace AND x.user_id = t.user_id AND x.session_id = t.session_id
      AND x.window_end = t.window_end AND o.org = t.org;

UPDATE loom.session_outcomes t SET session_id = pg_temp.writer_ref('loom.session:', t.session_id, o.key)
    FROM (SELECT org, loom.unwrapped_key(key) AS key FROM loom.user_ref_keys) o WHERE o.org = t.org;

UPDATE loom.learnings_queue t SET
        sealed = encrypt(convert_to('{' || pg_temp.writer_fields(t.agent, '') || ',"text":'
            || to_json(convert_from(decrypt(t.sealed, x.k, 'aes'), 'UTF8'))::text || '}', 'UTF8'), x.k, 'aes'),
        agent = pg_temp.writer_ref('loom.agent:', t.agent, o.key)
    FROM (SELECT org, namespace, candidate_id, hmac('loom.learning'::bytea, loom.unwrapped_key(data_key), 'sha256') AS k
            FROM loom.learnings_queue) x,
        (SELECT org, loom.unwrapped_key(key) AS key FROM loom.user_ref_keys) o
    WHERE x.org = t.org AND x.namespace = t.namespace AND x.candidate_id = t.candidate_id AND o.org = t.org;

UPDATE loom.learnings_supporters t SET
        sealed = encrypt(convert_to('{' || pg_temp.writer_fields(t.agent, t.session_id) || ',"text":'
            || to_json(convert_from(decrypt(t.sealed, x.k, 'aes'), 'UTF8'))::text || '}', 'UTF8'), x.k, 'aes'),
        agent = pg_temp.writer_ref('loom.agent:', t.agent, o.key),
        session_id = pg_temp.writer_ref('loom.session:', t.session_id, o.key)
    FROM (SELECT org, namespace, candidate_id, user_id, session_id, message_index,
                hmac('loom.learning'::bytea, loom.unwrapped_key(data_key), 'sha256') AS k
            FROM loom.learnings_supporters) x,
        (SELECT org, loom.unwrapped_key(key) AS key FROM loom.user_ref_keys) o
    WHERE x.org = t.org AND x.namespace = t.namespace AND x.candidate_id = t.candidate_id AND x.user_id = t.user_id
      AND x.session_id = t.session_id AND x.message_index = t.message_index AND o.org = t.org;

-- A kept search trace names the session its search was narrowed to by reference, as
-- memory.search_trace compares it with a session-bound token's.
UPDATE loom.search_traces t SET session_id = pg_temp.writer_ref('loom.session:', t.session_id, o.key)
    FROM (SELECT org, loom.unwrapped_key(key) AS key FROM loom.user_ref_keys) o
    WHERE o.org = t.org AND t.session_id NOT IN ('', '-');

DROP FUNCTION pg_temp.writer_ref(text, text, bytea);
DROP FUNCTION pg_temp.writer_fields(text, text);
