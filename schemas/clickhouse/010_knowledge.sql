-- The knowledge plane's read models (knowledge/): the projector writes one documents
-- row per document revision and one chunks row per chunk of a revision that wrote
-- content, from the knowledge.document.* records of the topic. Postgres's
-- loom.knowledge_heads says which version is served; these keep every version, each
-- collapsing a row seen twice. user_id is always empty (documents belong to their
-- namespace): it is here because an erasure's fence reads it on every table.

CREATE TABLE IF NOT EXISTS loom.documents (
    org           String,
    namespace     String,
    user_id       String,
    source_uri    String,
    doc_id        String,
    version       UInt64,
    seq           UInt64,
    event_type    String,
    op            String,
    format        String,
    title         String,
    content_type  String,
    tags          Array(String),
    deleted       UInt8,
    chunk_count   UInt32,
    bytes         UInt64,
    actor         String,
    created_at    DateTime,
    updated_at    DateTime
) ENGINE = ReplacingMergeTree(seq)
ORDER BY (org, namespace, source_uri, version);

CREATE TABLE IF NOT EXISTS loom.chunks (
    org            String,
    namespace      String,
    user_id        String,
    source_uri     String,
    doc_id         String,
    version        UInt64,
    seq            UInt64,
    ordinal        UInt32,
    kind           String,
    heading_path   Array(String),
    text           String,
    embedding      Array(Float32),
    embedding_dim  UInt16
) ENGINE = ReplacingMergeTree(seq)
ORDER BY (org, namespace, source_uri, version, ordinal);
