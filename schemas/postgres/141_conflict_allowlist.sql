-- The conflict allowlist (conflict_allowlist.add / .remove / .list): pairs of a
-- namespace's memories a writer said are not in conflict and not duplicates of each
-- other. memory.set's verdict and the conflict resolver skip an allowlisted pair
-- (memory-architecture, memory.set step 10: "allowlisted pairs skip the check"). The
-- list is part of the namespace's policy: a change advances the org's policy
-- generation, and a write judged under the list before it is judged again. Ids only:
-- memory_a sorts before memory_b; user_ids are the users of the two rows when the pair
-- was added, seq the namespace's generation then, so an erasure of a user (or of the
-- namespace) deletes the pairs naming its rows below its fence.
CREATE TABLE loom.conflict_allowlist (
    org       text        NOT NULL,
    namespace text        NOT NULL,
    memory_a  uuid        NOT NULL,
    memory_b  uuid        NOT NULL,
    user_ids  text[]      NOT NULL,
    seq       bigint      NOT NULL,
    added_by  text        NOT NULL,
    added_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org, namespace, memory_a, memory_b),
    CHECK (memory_a < memory_b)
);
