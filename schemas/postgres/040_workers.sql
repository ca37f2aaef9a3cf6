-- The workers role (command/workers.go): the conflict resolver and the entity
-- extractor, each a consumer group of the revisions topic that queues here what it
-- owes, one row per written version, and drains the queue in passes. The row is also
-- the version's stamp: a replay of the group queues it again, finds it done and
-- judges nothing twice. Ids, versions, hashes and verdict codes only: no text.
CREATE TABLE loom.worker_items (
    worker         text        NOT NULL CHECK (worker IN ('conflict_resolver', 'entity_extractor')),
    org            text        NOT NULL,
    namespace      text        NOT NULL,
    memory_id      uuid        NOT NULL,
    version        bigint      NOT NULL,
    seq            bigint      NOT NULL,
    user_id        text        NOT NULL,
    content_sha256 text        NOT NULL,
    written_at     timestamptz NOT NULL,
    state          text        NOT NULL DEFAULT 'owed' CHECK (state IN ('owed', 'done')),
    -- done: judged, errored, skipped (nothing left to judge), extracted, empty.
    outcome        text,
    attempts       integer     NOT NULL DEFAULT 0,
    next_at        timestamptz NOT NULL DEFAULT now(),
    lease_until    timestamptz,
    detail         jsonb,
    queued_at      timestamptz NOT NULL DEFAULT now(),
    done_at        timestamptz,
    PRIMARY KEY (worker, org, namespace, memory_id, version)
);
CREATE INDEX worker_items_owed ON loom.worker_items (worker, next_at) WHERE state = 'owed';
CREATE INDEX worker_items_sweep ON loom.worker_items (done_at) WHERE state = 'done';

-- An Undo of a retirement (memory.unsupersede): the pair and the values both rows held
-- at the Undo. While both still hold them, the resolver leaves the pair alone.
CREATE TABLE loom.conflict_undos (
    org          text        NOT NULL,
    namespace    text        NOT NULL,
    loser_id     uuid        NOT NULL,
    winner_id    uuid        NOT NULL,
    loser_sha    text        NOT NULL,
    winner_sha   text        NOT NULL,
    undo_version bigint      NOT NULL,
    undone_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org, namespace, loser_id, winner_id)
);

-- The entity extractor's aliases: per namespace, each spelling (canonical form) and
-- the entity it names. The first row of the namespace (lowest seq) to state a
-- spelling decides it, and rows are extracted in seq order, so a replay resolves
-- the same way. Entity names come from memory text: an erasure deletes the scope's
-- rows, a redaction the rows its memory introduced.
CREATE TABLE loom.entity_aliases (
    org        text        NOT NULL,
    namespace  text        NOT NULL,
    alias      text        NOT NULL,
    entity     text        NOT NULL,
    user_id    text        NOT NULL,
    memory_id  uuid        NOT NULL,
    seq        bigint      NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org, namespace, alias)
);
CREATE INDEX entity_aliases_memory ON loom.entity_aliases (org, namespace, memory_id);
