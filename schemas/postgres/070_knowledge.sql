-- The knowledge plane's authority (knowledge/command, docs/architecture.md): the head
-- of every knowledge source, keyed by (org, namespace, source_uri), and every
-- revision's data key. A commit locks the heads it replaces and refuses the whole
-- commit when one moved past the version its writer read (409 PRECONDITION_FAILED).
--
-- The head's text (title, tags, metadata, the document's text and outline) is sealed
-- as memory rows are (migration 056): AES-256-CBC under HMAC-SHA256(data key,
-- 'loom.row'), the key being its revision's, wrapped under the KEK in
-- knowledge_revisions. An erasure deletes both tables' rows: the keys go, so the topic's
-- copies no longer open.
CREATE TABLE loom.knowledge_heads (
    org          text        NOT NULL,
    namespace    text        NOT NULL,
    source_uri   text        NOT NULL,
    doc_id       uuid        NOT NULL,
    version      bigint      NOT NULL,
    seq          bigint      NOT NULL, -- the revision whose key seals this row
    format       text        NOT NULL,
    deleted      boolean     NOT NULL DEFAULT false,
    chunk_count  integer     NOT NULL DEFAULT 0,
    bytes        bigint      NOT NULL DEFAULT 0,
    -- The revision and version of the chunks the head serves (knowledge search): a
    -- delete or a restore inserts none and keeps them.
    chunks_seq     bigint    NOT NULL,
    chunks_version bigint    NOT NULL,
    actor        text        NOT NULL,
    sealed       bytea       NOT NULL,
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    PRIMARY KEY (org, namespace, source_uri)
);

CREATE TABLE loom.knowledge_revisions (
    org          text        NOT NULL,
    namespace    text        NOT NULL,
    seq          bigint      NOT NULL,
    source_uri   text        NOT NULL,
    version      bigint      NOT NULL,
    event_type   text        NOT NULL,
    data_key     bytea       NOT NULL CHECK (octet_length(data_key) IN (32, 89)),
    committed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org, namespace, seq)
);
CREATE INDEX knowledge_revisions_by_source ON loom.knowledge_revisions (org, namespace, source_uri, version);
