-- knowledge.ingest's jobs (knowledge/command/ingest*.go, knowledge/store/jobs.go): a
-- batch of documents uploaded in one request, committed here with its files, and run
-- by the workers role (workers/knowledge_ingest.go) one file at a time through the
-- knowledge plane's one commit.
--
-- Fencing: a run takes its job by raising lease_token, and every save of the run
-- (a file's commit, its progress, the job's end) locks the job's row and names that
-- token in the same transaction; a run that finds another token saves nothing more
-- (LeaseLost), one that finds no row (an erasure) stops (JobGone).
--
-- gen is the namespace's generation when the job was submitted: a namespace's or
-- org's erasure removes the jobs below its fence (internal/erasure's registry).
CREATE TABLE loom.knowledge_jobs (
    org                 text        NOT NULL,
    namespace           text        NOT NULL,
    ingestion_id        uuid        NOT NULL,
    gen                 bigint      NOT NULL,
    state               text        NOT NULL CHECK (state IN ('pending', 'processing', 'completed', 'failed', 'cancelled')),
    actor               text        NOT NULL,
    total               integer     NOT NULL,
    processed           integer     NOT NULL DEFAULT 0,
    written             integer     NOT NULL DEFAULT 0,
    unchanged           integer     NOT NULL DEFAULT 0,
    failed              integer     NOT NULL DEFAULT 0,
    chunks              integer     NOT NULL DEFAULT 0,
    bytes               bigint      NOT NULL DEFAULT 0,
    lease_owner         text        NOT NULL DEFAULT '',
    lease_until         timestamptz,
    lease_token         bigint      NOT NULL DEFAULT 0,
    runs                integer     NOT NULL DEFAULT 0,
    cancel_requested_at timestamptz,
    cancelled_by        text        NOT NULL DEFAULT '',
    -- The job's data key, wrapped under the KEK: it seals its files' bodies.
    data_key            bytea       NOT NULL CHECK (octet_length(data_key) IN (32, 89)),
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    finished_at         timestamptz,
    PRIMARY KEY (org, namespace, ingestion_id)
);
-- The queue's read: the open jobs, oldest first.
CREATE INDEX knowledge_jobs_open ON loom.knowledge_jobs (created_at) WHERE state IN ('pending', 'processing');
-- The expiry sweep: a job no run saved for 30 days goes.
CREATE INDEX knowledge_jobs_updated ON loom.knowledge_jobs (updated_at);

-- Each file of a job: its description in the clear (a source URI is a key, as in
-- loom.knowledge_heads) and its body sealed under the job's data key (label
-- 'loom.ingest'). A file's body is dropped once the file is done, failed or its job
-- ended, so an ended job keeps only its account.
CREATE TABLE loom.knowledge_job_files (
    org           text     NOT NULL,
    namespace     text     NOT NULL,
    ingestion_id  uuid     NOT NULL,
    ordinal       integer  NOT NULL,
    source_uri    text     NOT NULL,
    state         text     NOT NULL CHECK (state IN ('pending', 'written', 'unchanged', 'failed', 'cancelled')),
    bytes         bigint   NOT NULL,
    sealed        bytea,
    version       bigint,
    chunk_count   integer  NOT NULL DEFAULT 0,
    error_code    text     NOT NULL DEFAULT '',
    error_message text     NOT NULL DEFAULT '',
    PRIMARY KEY (org, namespace, ingestion_id, ordinal),
    FOREIGN KEY (org, namespace, ingestion_id) REFERENCES loom.knowledge_jobs ON DELETE CASCADE
);
