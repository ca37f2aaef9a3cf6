-- The audit trail's checkpoints (memory-architecture, "Audit rows"): a paced pass of the
-- workers role verifies each namespace's audit chain in ClickHouse past its last
-- checkpoint and records the row hash it reached, itself chained: checkpoint_hash is
-- SHA-256 over the previous checkpoint's hash and this one's fields. Postgres is the
-- authority: a chain rewritten in ClickHouse no longer meets these. Hashes and seqs
-- only, no keys or values.
CREATE TABLE IF NOT EXISTS loom.audit_checkpoints (
    org             text        NOT NULL,
    namespace       text        NOT NULL,
    seq             bigint      NOT NULL, -- the audit row the checkpoint reached
    row_hash        text        NOT NULL, -- that row's hash
    rows_verified   bigint      NOT NULL, -- audit rows the pass walked since the checkpoint before
    prev_checkpoint text        NOT NULL, -- the checkpoint_hash before ('' for the first)
    checkpoint_hash text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org, namespace, seq)
);
