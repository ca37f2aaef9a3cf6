-- The audit of the operations that write a namespace in bulk: namespace.restore,
-- namespace.rollback (a run, not a dry run) and the blacklist sweep. A row is written
-- before the first batch and completed after the last, with the counts of what landed
-- and the error that stopped it, so a run cut short (a head that moved, a lost commit
-- answer, a crash) is on record with the batches it wrote. Ids and counts only: each
-- revision keeps its own hash-only row in loom.memory_revisions.
CREATE TABLE loom.namespace_operations (
    org          text        NOT NULL,
    id           uuid        NOT NULL,
    op           text        NOT NULL,
    namespace    text        NOT NULL,
    actor        text        NOT NULL,
    request_id   text        NOT NULL DEFAULT '',
    params       jsonb       NOT NULL,
    counts       jsonb,
    batches      int,
    error        text,
    started_at   timestamptz NOT NULL DEFAULT now(),
    completed_at timestamptz,
    PRIMARY KEY (org, id)
);
CREATE INDEX namespace_operations_by_namespace ON loom.namespace_operations (org, namespace, started_at);
