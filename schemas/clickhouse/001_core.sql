-- The read models the projector builds from the topic. Every table is keyed so a
-- replayed or duplicated record collapses into the row it repeats: the current-row
-- tables replace by version on the memory's identity, the history and audit tables
-- on their natural key. Written in the subset ClickHouse 18.16 and 24.x both run.

-- The current row of every key (FINAL reads the newest version).
CREATE TABLE IF NOT EXISTS loom.memory (
    org                 String,
    namespace           String,
    agent               String,
    user_id             String,
    session_id          String,
    memory_key          String,
    memory_id           UUID,
    version             UInt64,
    seq                 UInt64,
    memory_type         String,
    status              String,
    tombstone           UInt8,
    value               String,
    content_sha256      String,
    tags                Array(String),
    entities            Array(String),
    confidence          Float32,
    reinforcement_count UInt32,
    actor               String,
    source_class        String,
    embedding_model     String,
    embedding_dim       UInt16,
    created_at          DateTime,
    updated_at          DateTime,
    committed_at        DateTime
) ENGINE = ReplacingMergeTree(version)
ORDER BY (org, namespace, agent, user_id, session_id, memory_key);

-- Every version of every key.
CREATE TABLE IF NOT EXISTS loom.memory_versions (
    org                 String,
    namespace           String,
    agent               String,
    user_id             String,
    session_id          String,
    memory_key          String,
    version             UInt64,
    memory_id           UUID,
    seq                 UInt64,
    event_type          String,
    op                  String,
    memory_type         String,
    status              String,
    tombstone           UInt8,
    value               String,
    content_sha256      String,
    tags                Array(String),
    entities            Array(String),
    confidence          Float32,
    reinforcement_count UInt32,
    actor               String,
    source_class        String,
    created_at          DateTime,
    updated_at          DateTime,
    committed_at        DateTime
) ENGINE = ReplacingMergeTree()
ORDER BY (org, namespace, agent, user_id, session_id, memory_key, version);

-- Search documents: the current vector of every embedded key, carrying the columns
-- search filters on so no leg joins back to memory.
CREATE TABLE IF NOT EXISTS loom.memory_embeddings (
    org             String,
    namespace       String,
    agent           String,
    user_id         String,
    session_id      String,
    memory_key      String,
    memory_id       UUID,
    version         UInt64,
    seq             UInt64,
    memory_type     String,
    status          String,
    tombstone       UInt8,
    content_sha256  String,
    tags            Array(String),
    source_class    String,
    embedding_model String,
    embedding_dim   UInt16,
    embedding       Array(Float32),
    updated_at      DateTime
) ENGINE = ReplacingMergeTree(version)
ORDER BY (org, namespace, agent, user_id, session_id, memory_key);

-- One hash-only row per committed revision: identity, actor, key, id, content hash,
-- source class, status. Never a value.
CREATE TABLE IF NOT EXISTS loom.audit_log (
    org            String,
    namespace      String,
    seq            UInt64,
    op             String,
    event_type     String,
    occurred_at    DateTime,
    actor          String,
    agent          String,
    user_id        String,
    session_id     String,
    memory_key     String,
    memory_id      UUID,
    version        UInt64,
    content_sha256 String,
    source_class   String,
    status         String,
    request_id     String
) ENGINE = ReplacingMergeTree()
ORDER BY (org, namespace, seq, op);
