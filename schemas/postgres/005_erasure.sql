-- Erasure and redaction (postgres-authority § Erasure, § Redaction): deletion evidence,
-- the erasure sagas, the idempotency answers an erasure fenced, and the records of the
-- generations that are not revisions. None of these tables holds memory content.

-- Deletion evidence: the namespace and id of each memory an erasure removed. A write
-- built from a head read before the erasure is refused at its commit while the
-- evidence is kept (LOOM_PG_ERASURE_EVIDENCE_HOURS, judged by erased_at where read).
-- quiet_at: when no publisher that read the erased records before the erasure could
-- still land them (the saga's wait).
CREATE TABLE loom.erased_memories (
    org        text        NOT NULL,
    namespace  text        NOT NULL,
    memory_id  uuid        NOT NULL,
    erasure_id uuid        NOT NULL,
    erased_at  timestamptz NOT NULL DEFAULT now(),
    quiet_at   timestamptz,
    PRIMARY KEY (org, namespace, memory_id)
);
CREATE INDEX erased_memories_sweep ON loom.erased_memories (erased_at);
CREATE INDEX erased_memories_by_erasure ON loom.erased_memories (erasure_id);

-- The erasures requested of the deployment, one saga each. steps maps each step that
-- completed to when; fences maps each affected namespace to the generation of its
-- memory.erased record (rows of the scope below it are erased). A saga runs under a
-- lease; erasure_recovery takes over one whose lease lapsed, up to max attempts.
-- residue and census are the last residue census: per table, the non-zero counts and
-- every count.
CREATE TABLE loom.erasure_ledger (
    org           text        NOT NULL,
    id            uuid        NOT NULL,
    scope         jsonb       NOT NULL,
    purge         boolean     NOT NULL,
    actor         text        NOT NULL,
    status        text        NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
    steps         jsonb       NOT NULL DEFAULT '{}',
    fences        jsonb       NOT NULL DEFAULT '{}',
    removed       jsonb       NOT NULL DEFAULT '{}',
    attempts      integer     NOT NULL DEFAULT 1,
    lease_until   timestamptz NOT NULL,
    last_error    text,
    residue       jsonb,
    residue_count bigint,
    census        jsonb,
    requested_at  timestamptz NOT NULL DEFAULT now(),
    verified_at   timestamptz,
    finished_at   timestamptz,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org, id)
);
CREATE INDEX erasure_ledger_running ON loom.erasure_ledger (lease_until) WHERE status = 'running';
CREATE INDEX erasure_ledger_sweep ON loom.erasure_ledger (requested_at);

-- An idempotency answer an erasure removed: the key stays, with no revisions and no
-- answer, and a retry with it answers 404 for the whole request.
ALTER TABLE loom.idempotency DROP CONSTRAINT idempotency_state_check;
ALTER TABLE loom.idempotency ADD CONSTRAINT idempotency_state_check
    CHECK (state IN ('running', 'committed', 'done', 'erased'));

-- The records of generations that carry no revision (memory.erased, memory.redacted),
-- as they were queued: plain fields and ids, content sealed under no kept key. The
-- journal holds every other generation; a republish re-creates these from here, so a
-- rebuilt topic has no gap.
CREATE TABLE loom.generation_records (
    org        text        NOT NULL,
    namespace  text        NOT NULL,
    seq        bigint      NOT NULL,
    event_type text        NOT NULL,
    record_key bytea       NOT NULL,
    headers    jsonb       NOT NULL,
    value      bytea       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org, namespace, seq)
);
