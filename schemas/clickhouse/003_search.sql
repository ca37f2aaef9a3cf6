-- The search legs beside the vector one. memory_lexical holds each row's index terms
-- (lower-cased, stemmed, stopwords out) with their frequencies, for Okapi BM25; the
-- namespace's document statistics are computed from it at query time, so they are
-- exact under any replay. memory_chunks holds the windows a long value is cut into,
-- each with its own vector; a chunk hit folds onto its row. Both replace by version
-- on their identity, as memory_embeddings does.

CREATE TABLE IF NOT EXISTS loom.memory_lexical (
    org            String,
    namespace      String,
    agent          String,
    user_id        String,
    session_id     String,
    memory_key     String,
    memory_id      UUID,
    version        UInt64,
    seq            UInt64,
    memory_type    String,
    status         String,
    tombstone      UInt8,
    sensitivity    String,
    pinned         UInt8,
    content_sha256 String,
    tags           Array(String),
    expires_at     Nullable(DateTime),
    valid_to       Nullable(DateTime),
    updated_at     DateTime,
    terms          Array(String),
    tfs            Array(UInt16),
    doc_len        UInt32,
    key_terms      Array(String)
) ENGINE = ReplacingMergeTree(version)
ORDER BY (org, namespace, agent, user_id, session_id, memory_key);

CREATE TABLE IF NOT EXISTS loom.memory_chunks (
    org            String,
    namespace      String,
    agent          String,
    user_id        String,
    session_id     String,
    memory_key     String,
    chunk          UInt16,
    memory_id      UUID,
    version        UInt64,
    seq            UInt64,
    memory_type    String,
    status         String,
    tombstone      UInt8,
    sensitivity    String,
    content_sha256 String,
    expires_at     Nullable(DateTime),
    valid_to       Nullable(DateTime),
    text           String,
    embedding      Array(Float32),
    embedding_dim  UInt16
) ENGINE = ReplacingMergeTree(version)
ORDER BY (org, namespace, agent, user_id, session_id, memory_key, chunk);
