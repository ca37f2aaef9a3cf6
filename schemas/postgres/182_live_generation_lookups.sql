-- Lookups by clear value that find rows named under either live generation of the
-- org's user reference key (migration 181) while a rotation runs (issue 28): the
-- current key first, then the retired one. With one generation (every org until a
-- rotation runs) each answers exactly what its one-generation form answers.

-- The org's live keys, unwrapped, with their generations: the current, then the
-- retired one while a rotation runs. One probe of the org's row.
CREATE FUNCTION loom.live_ref_keys(o text) RETURNS TABLE (gen int, key bytea)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT v.gen, loom.unwrapped_key(v.key)
    FROM loom.user_ref_keys r CROSS JOIN LATERAL (VALUES (r.gen, r.key), (r.retired_gen, r.retired)) AS v(gen, key)
    WHERE r.org = o AND v.key IS NOT NULL
$$;

-- u's reference under every live generation (loom.user_ref's set form), current first;
-- '' and '-' as they are; NULL when the org has no key. A lookup binds it as
-- user_id = ANY((SELECT loom.user_refs($org, $user))).
CREATE FUNCTION loom.user_refs(o text, u text) RETURNS text[]
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN u IS NULL OR u IN ('', '-') THEN ARRAY[u]
        ELSE (SELECT array_agg(encode(hmac(convert_to(u, 'UTF8'), k.key, 'sha256'), 'hex') ORDER BY k.gen DESC)
              FROM (SELECT * FROM loom.live_ref_keys(o) OFFSET 0) k) END
$$;

-- loom.identity_refs (migration 178) under every live generation: one row per identity
-- and generation, so the heads' lateral lookups (heads.Many, heads.Read) find an
-- identity's head under whichever generation named it. The keys' subquery keeps
-- OFFSET 0: each key is unwrapped once.
CREATE OR REPLACE FUNCTION loom.identity_refs(o text, agents text[], users text[], sessions text[], keys text[])
RETURNS TABLE (agent text, user_id text, session_id text, memory_key text,
    agent_ref text, user_ref text, session_ref text, key_ref text)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT u.a, u.u, u.s, u.k,
        CASE WHEN u.a IS NULL OR u.a IN ('', '-') THEN u.a
            ELSE encode(hmac(convert_to('loom.agent:' || u.a, 'UTF8'), x.key, 'sha256'), 'hex') END,
        CASE WHEN u.u IS NULL OR u.u IN ('', '-') THEN u.u
            ELSE encode(hmac(convert_to(u.u, 'UTF8'), x.key, 'sha256'), 'hex') END,
        CASE WHEN u.s IS NULL OR u.s IN ('', '-') THEN u.s
            ELSE encode(hmac(convert_to('loom.session:' || u.s, 'UTF8'), x.key, 'sha256'), 'hex') END,
        encode(hmac(convert_to('loom.key:' || u.k, 'UTF8'), x.key, 'sha256'), 'hex')
    FROM (SELECT k.key FROM loom.live_ref_keys(o) k OFFSET 0) x,
        unnest(agents, users, sessions, keys) AS u(a, u, s, k)
$$;
