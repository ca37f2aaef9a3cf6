-- Operating a namespace: token lifecycle, restores, the audit of what left the
-- authority, the blacklist sweep's outcome, and the journal read by user.

-- A token may expire; a rotation names the token that replaced it.
ALTER TABLE loom.api_tokens ADD COLUMN expires_at timestamptz;
ALTER TABLE loom.api_tokens ADD COLUMN replaced_by text;

-- namespace.restore is idempotent per snapshot: a restore that completed is recorded
-- with its counts, and a retry of the same snapshot into the same namespace answers
-- them and writes nothing. Ids and counts only.
CREATE TABLE loom.namespace_restores (
    org          text        NOT NULL,
    namespace    text        NOT NULL,
    snapshot_id  uuid        NOT NULL,
    source       text        NOT NULL,
    counts       jsonb       NOT NULL,
    actor        text        NOT NULL,
    completed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org, namespace, snapshot_id)
);

-- The hash-only audit of reads that hand memory out of Loom in bulk: a namespace
-- snapshot, a subject-access export. A row is written before the first byte is
-- streamed and completed, with the count and the SHA-256 of what was sent, after the
-- last; a stream cut short keeps its row with completed_at NULL.
CREATE TABLE loom.read_audit (
    org          text        NOT NULL,
    id           uuid        NOT NULL,
    op           text        NOT NULL,
    namespace    text        NOT NULL DEFAULT '',
    user_id      text        NOT NULL DEFAULT '',
    generation   bigint      NOT NULL DEFAULT 0,
    actor        text        NOT NULL,
    rows         bigint,
    sha256       text,
    started_at   timestamptz NOT NULL DEFAULT now(),
    completed_at timestamptz,
    PRIMARY KEY (org, id)
);

-- The last sweep of each pattern: when, what it matched, and why it stopped short.
ALTER TABLE loom.blacklist ADD COLUMN swept_at timestamptz;
ALTER TABLE loom.blacklist ADD COLUMN sweep_matched bigint;
ALTER TABLE loom.blacklist ADD COLUMN sweep_error text;

-- A user's journal across an org's namespaces: the subject-access export, and the
-- namespaces an erasure of a user fences.
CREATE INDEX memory_revisions_by_user ON loom.memory_revisions (org, user_id, namespace);
