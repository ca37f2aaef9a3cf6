-- The references of many identities of one org (agents, users, sessions, keys, index
-- by index) with the org's key unwrapped once for all of them: what a lookup of many
-- heads or revisions binds (heads.Many, QueueManyOpened, versionsAt), where one
-- loom.writer_refs and one loom.user_ref an identity unwrapped it twice an identity.
-- The same values as loom.agent_ref, loom.user_ref, loom.session_ref and loom.key_ref
-- ('' and '-' stay as they are); no row when the org has no key (then no row of it is
-- stored). The key's subquery keeps OFFSET 0: pulled up, loom.unwrapped_key would run
-- once a reference computed.
CREATE FUNCTION loom.identity_refs(o text, agents text[], users text[], sessions text[], keys text[])
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
    FROM (SELECT loom.unwrapped_key(r.key) AS key FROM loom.user_ref_keys r WHERE r.org = o OFFSET 0) x,
        unnest(agents, users, sessions, keys) AS u(a, u, s, k)
$$;
