-- The knowledge plane's dataset catalog (postgres-authority's loom.knowledge_datasets):
-- one row per approval of a dataset (a table found in a document) at a document
-- version, with the schema the approver approved. knowledge.query serves a dataset
-- only while the source's head is at a version its catalog holds a row for. The cells
-- are not copied: the snapshot that serves a dataset is the head's own sealed body
-- (loom.knowledge_heads), so the catalog holds names and types, never a value.
-- seq is the revision approved, so an erasure's fence scopes the rows as it does the
-- heads' (internal/erasure's documentScope).
CREATE TABLE loom.knowledge_datasets (
    org         text        NOT NULL,
    namespace   text        NOT NULL,
    source_uri  text        NOT NULL,
    doc_version bigint      NOT NULL,
    dataset_id  text        NOT NULL,
    seq         bigint      NOT NULL,
    schema      jsonb       NOT NULL,
    approved_by text        NOT NULL,
    approved_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org, namespace, source_uri, doc_version, dataset_id)
);
