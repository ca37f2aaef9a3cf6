-- loom.named_user_ref (migration 180) checked a writer's bound reference against the
-- org's current user reference key alone. For a moment after a rotation's swap (issue
-- 28; internal/atrest refrotate.go) a process still names rows under the key it cached,
-- now the retired one, until it reads the new generation (userref.StaleLimit bounds
-- it): a new user's first write then failed the check and answered 500. A reference
-- under any live key is the user's: the user's name is kept under the current key, and
-- the rotation's rewrite, which waits that bound out before it maps and rewrites, moves
-- the row to the current key with the others.
CREATE OR REPLACE FUNCTION loom.named_user_ref(o text, u text, ref text) RETURNS text
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF u IS NULL OR u IN ('', '-') THEN
        RETURN u;
    END IF;
    IF EXISTS (SELECT 1 FROM loom.user_names n WHERE n.org = o AND n.user_ref = ref) THEN
        RETURN ref;
    END IF;
    IF loom.named_user(o, u) IS DISTINCT FROM ref AND NOT ref = ANY(loom.user_refs(o, u)) THEN
        RAISE EXCEPTION 'loom: the reference bound for a user of org % is not loom.user_ref''s', o;
    END IF;
    RETURN ref;
END
$$;
