-- A rotation of an org's user reference key (issue 28; internal/atrest, refrotate.go)
-- rewrites every reference column from the retired key's references to the current
-- key's. This is its mapping: old reference -> new, one row per live clear value (a
-- user with a name, a memory key, an agent, a session, and the user of an erasure
-- ledger row), computed in SQL from the clear values under both keys once the swap
-- is done. References made with different prefixes ('loom.agent:', 'loom.session:',
-- 'loom.key:', none for a user) never collide, so one map serves every column. An
-- erased user has no name and no ledger key that opens, so the map never holds their
-- reference. It is dropped with the retired key, at the rotation's end; a run that
-- stops leaves it for the next, which rebuilds it (idempotently) and goes on.
CREATE TABLE loom.ref_rotation_map (
    org text NOT NULL,
    old text NOT NULL,
    new text NOT NULL,
    PRIMARY KEY (org, old)
);

-- The rotation's count of rows left naming a reference the map did not make.
CREATE INDEX ref_rotation_map_new ON loom.ref_rotation_map (org, new);

-- The rotations under way: when each org's swap was made. The at-rest pass finishes a
-- rotation whose process stopped (one swapped a while ago that no process holds);
-- `loomd refs rotate` finishes one at once.
CREATE TABLE loom.ref_rotations (
    org        text        PRIMARY KEY,
    swapped_at timestamptz NOT NULL DEFAULT now()
);
