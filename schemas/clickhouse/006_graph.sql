-- The entity graph: a pure fold over the topic (internal/graph), built by the
-- projector from the entities and relations writers declare. The triple, edge and
-- row-link tables keep every version a record wrote beside the others, keyed by the
-- natural key and that record's seq: a replayed record writes the same rows again and
-- they collapse, a close is a new version (never a mutation), and the graph as it was
-- after any seq reads back with argMax(.., seq), which is how a batch reads the state
-- it folds over. The row links carry memory_id and user_id, so an erasure finds them
-- (and the facts only its rows held) after the rows are gone.

-- Entities by canonical name (lower case, whitespace collapsed), one row per spelling,
-- declared type and user of the rows naming it: the latest sighting stays.
CREATE TABLE IF NOT EXISTS loom.entities (
    org         String,
    namespace   String,
    name        String,
    user_id     String,
    alias       String,
    entity_type String,
    seq         UInt64,
    seen_at     DateTime
) ENGINE = ReplacingMergeTree(seq)
ORDER BY (org, namespace, name, user_id, alias, entity_type);

-- Facts: each observation of (subject, predicate, object) is one interval, opened by
-- the record observed_seq names. valid_to is the stated end or the end a close gave,
-- invalid_at the moment a rule closed it; seen_us orders one write's statements.
-- restored marks an Undo's observation, fallback a value stated again when the newer
-- one that closed it went away.
CREATE TABLE IF NOT EXISTS loom.entity_triples (
    org          String,
    namespace    String,
    subject      String,
    predicate    String,
    object       String,
    observed_seq UInt64,
    seq          UInt64,
    cardinality  String,
    valid_from   DateTime,
    valid_to     Nullable(DateTime),
    stated_from  Nullable(DateTime),
    stated_to    Nullable(DateTime),
    invalid_at   Nullable(DateTime),
    seen_at      DateTime,
    seen_us      UInt64,
    restored     UInt8,
    fallback     UInt8,
    committed_at DateTime
) ENGINE = ReplacingMergeTree()
ORDER BY (org, namespace, subject, predicate, object, observed_seq, seq);

-- Which row holds which fact (holds = 0 once it no longer does), over which value
-- (content_sha256) and as part of which observation.
CREATE TABLE IF NOT EXISTS loom.entity_triple_rows (
    org            String,
    namespace      String,
    subject        String,
    predicate      String,
    object         String,
    memory_id      UUID,
    seq            UInt64,
    observed_seq   UInt64,
    holds          UInt8,
    agent          String,
    user_id        String,
    session_id     String,
    memory_key     String,
    content_sha256 String,
    memory_type    String,
    stated_from    Nullable(DateTime),
    stated_to      Nullable(DateTime),
    committed_at   DateTime
) ENGINE = ReplacingMergeTree()
ORDER BY (org, namespace, subject, predicate, object, memory_id, seq);

-- Co-occurrence of two entities on a row (entity_a < entity_b), one interval per
-- opening; weight counts the rows that ever named both.
CREATE TABLE IF NOT EXISTS loom.entity_edges (
    org          String,
    namespace    String,
    entity_a     String,
    entity_b     String,
    opened_seq   UInt64,
    seq          UInt64,
    valid_from   DateTime,
    valid_to     Nullable(DateTime),
    weight       UInt32,
    committed_at DateTime
) ENGINE = ReplacingMergeTree()
ORDER BY (org, namespace, entity_a, entity_b, opened_seq, seq);

-- Which row names both entities of a pair (holds = 0 once it no longer does).
CREATE TABLE IF NOT EXISTS loom.entity_edge_rows (
    org            String,
    namespace      String,
    entity_a       String,
    entity_b       String,
    memory_id      UUID,
    seq            UInt64,
    opened_seq     UInt64,
    holds          UInt8,
    agent          String,
    user_id        String,
    session_id     String,
    memory_key     String,
    content_sha256 String,
    memory_type    String,
    committed_at   DateTime
) ENGINE = ReplacingMergeTree()
ORDER BY (org, namespace, entity_a, entity_b, memory_id, seq);
