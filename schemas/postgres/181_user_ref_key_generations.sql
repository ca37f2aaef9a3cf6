-- An org's user reference key gets a generation (issue 28; docs/architecture.md, "What
-- references that an erasure or a rotation shreds would need"), as loom.name_wrap_keys
-- has (migration 158): gen counts the org's keys, key is the current one, and while a
-- rotation rewrites the org's reference columns the key it replaces is kept as
-- retired (retired_gen its generation), so a lookup by clear value still finds the
-- rows the retired key named. Every existing key is generation 1, and nothing sets
-- retired yet: the functions that compute references (loom.user_ref, key_ref,
-- writer_refs, identity_refs, ...) read key, the current generation, as before.
--
-- The retired key is never wrapped again under a new KEK (internal/atrest leaves the
-- column alone, as it leaves name_wrap_keys.retired): its copies must die with the KEK
-- it was wrapped under, or a reference kept in a dead tuple, the WAL or a backup would
-- still confirm a guess once the rotation is done.
--
-- A process caches the current key (internal/userref) and reads gen again, beside the
-- request, once its copy is a second old, so a rotation's swap reaches every process
-- within about that bound (plus the longest commit that read the key before the swap).
ALTER TABLE loom.user_ref_keys
    ADD COLUMN gen int NOT NULL DEFAULT 1 CHECK (gen > 0),
    ADD COLUMN retired_gen int,
    ADD COLUMN retired bytea CHECK (retired IS NULL OR octet_length(retired) IN (32, 89)),
    ADD CONSTRAINT user_ref_keys_retired_pair
        CHECK ((retired IS NULL) = (retired_gen IS NULL) AND (retired_gen IS NULL OR retired_gen < gen));
