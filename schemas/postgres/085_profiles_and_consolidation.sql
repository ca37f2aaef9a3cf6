-- Structured profiles and memory.consolidate (issue 32).
--
-- loom.profile_schemas: a namespace's profile schema (profile_schema.set), one row per
-- namespace; the structured_profile pass builds a profile for each user of a namespace
-- that has one. It holds the schema an admin wrote, no memory content. The profiles
-- themselves are memory rows (type profile, key profile:<user>), so their history,
-- erasure and read scope are memory's.
CREATE TABLE loom.profile_schemas (
    org         text        NOT NULL,
    namespace   text        NOT NULL,
    schema      jsonb       NOT NULL,
    -- sha256 of the schema's canonical JSON: a profile built under another hash is stale.
    schema_hash text        NOT NULL,
    updated_by  text        NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org, namespace)
);

-- loom.consolidation_runs: each memory.consolidate that wrote, and its undo. Ids,
-- versions and counts only: the merged rows and the summaries are named by memory id
-- and version (their text is the journal's), so an undo reads each merged row's
-- revision back from the journal and an erasure of the rows leaves nothing here to
-- restore.
CREATE TABLE loom.consolidation_runs (
    id          uuid        PRIMARY KEY,
    org         text        NOT NULL,
    namespace   text        NOT NULL,
    -- the scope the run clustered: a user's rows, or '' for every user's.
    user_id     text        NOT NULL DEFAULT '',
    actor       text        NOT NULL,
    status      text        NOT NULL DEFAULT 'done' CHECK (status IN ('done', 'undone')),
    -- [{summary_id, summary_version, merged: [{memory_id, read_version, tombstone_version}]}]
    clusters    jsonb       NOT NULL,
    -- [{cluster, reason}] for clusters not merged (key_taken, held_since_read, ...)
    failures    jsonb       NOT NULL DEFAULT '[]',
    model_calls integer     NOT NULL,
    merged_rows integer     NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    undone_at   timestamptz
);
CREATE INDEX consolidation_runs_scope ON loom.consolidation_runs (org, namespace, created_at);

-- The workers package names its workers (workers/workqueue.go); the list grows with
-- each pass, so the column is no longer checked against a fixed one here.
ALTER TABLE loom.worker_items DROP CONSTRAINT IF EXISTS worker_items_worker_check;
