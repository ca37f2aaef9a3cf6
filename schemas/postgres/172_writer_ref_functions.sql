-- How Postgres names a writer identity (an agent, a session) by reference, for the
-- tables that store one (migrations after this one move their columns onto it, as 155
-- did the user and 171 a memory's key): HMAC-SHA256 of 'loom.agent:' || agent (or
-- 'loom.session:' || session) under the org's user reference key, lowercase hex. The
-- prefix keeps an agent's, a session's, a key's and a user's references apart when
-- their clear values are equal. '' and '-' (no agent, no session) stay as they are:
-- they name no one. events.AgentRef and events.SessionRef are the same values in Go.
-- NULL when the org has no key yet. A statement binds them as init plans, (SELECT
-- loom.agent_ref($org, $agent)): the HMAC under the unwrapped key is never inlined,
-- and a bare call in a filter runs once a row scanned.

CREATE FUNCTION loom.agent_ref(o text, a text) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN a IS NULL OR a IN ('', '-') THEN a
        ELSE (SELECT encode(hmac(convert_to('loom.agent:' || a, 'UTF8'), loom.unwrapped_key(k.key), 'sha256'), 'hex')
              FROM loom.user_ref_keys k WHERE k.org = o) END
$$;

CREATE FUNCTION loom.session_ref(o text, s text) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN s IS NULL OR s IN ('', '-') THEN s
        ELSE (SELECT encode(hmac(convert_to('loom.session:' || s, 'UTF8'), loom.unwrapped_key(k.key), 'sha256'), 'hex')
              FROM loom.user_ref_keys k WHERE k.org = o) END
$$;

-- A write's key, agent and session references with the org's key unwrapped once:
-- ARRAY[key_ref, agent_ref, session_ref], bound as (SELECT loom.writer_refs($org, $key,
-- $agent, $session)) and indexed in the statement. NULL when the org has no key.
CREATE FUNCTION loom.writer_refs(o text, k text, a text, s text) RETURNS text[]
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT ARRAY[
        encode(hmac(convert_to('loom.key:' || k, 'UTF8'), x.key, 'sha256'), 'hex'),
        CASE WHEN a IS NULL OR a IN ('', '-') THEN a
            ELSE encode(hmac(convert_to('loom.agent:' || a, 'UTF8'), x.key, 'sha256'), 'hex') END,
        CASE WHEN s IS NULL OR s IN ('', '-') THEN s
            ELSE encode(hmac(convert_to('loom.session:' || s, 'UTF8'), x.key, 'sha256'), 'hex') END]
    FROM (SELECT loom.unwrapped_key(r.key) AS key FROM loom.user_ref_keys r WHERE r.org = o) x
$$;
