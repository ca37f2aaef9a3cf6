-- memory.touch's usage signal (command/touch.go), folded by the usage_fold pass
-- (workers/usage_fold.go): per memory, the touches not yet folded into its row's
-- reinforcement_count. The fold subtracts what it folded in the transaction that
-- commits the row, so a touch is folded once, and a replay or a crashed pass folds
-- nothing twice. Ids and counts only: no text.
CREATE TABLE loom.memory_touches (
    org         text        NOT NULL,
    namespace   text        NOT NULL,
    memory_id   uuid        NOT NULL,
    touches     integer     NOT NULL CHECK (touches >= 0),
    first_at    timestamptz NOT NULL DEFAULT now(),
    last_at     timestamptz NOT NULL DEFAULT now(),
    lease_until timestamptz,
    PRIMARY KEY (org, namespace, memory_id)
);
CREATE INDEX memory_touches_due ON loom.memory_touches (first_at);
