-- loom.named_user for a writer that computed the user's reference itself: the commit
-- (command/column_refs.go) binds the references of a row's user, agent, session and
-- key, computed in Go under the org's key it holds, rather than have each statement
-- unwrap the key and derive them again. ref is taken as bound; the user's name is
-- kept once, by loom.named_user, whose reference must then be ref: a writer whose
-- reference differed from Postgres's would store rows that no read by loom.user_ref
-- finds, so each user's first write (and first after an erasure) checks it. A user
-- named already costs one index lookup, no key unwrapped.
CREATE FUNCTION loom.named_user_ref(o text, u text, ref text) RETURNS text
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF u IS NULL OR u IN ('', '-') THEN
        RETURN u;
    END IF;
    IF EXISTS (SELECT 1 FROM loom.user_names n WHERE n.org = o AND n.user_ref = ref) THEN
        RETURN ref;
    END IF;
    IF loom.named_user(o, u) IS DISTINCT FROM ref THEN
        RAISE EXCEPTION 'loom: the reference bound for a user of org % is not loom.user_ref''s', o;
    END IF;
    RETURN ref;
END
$$;
