-- Promotions to shared scope (memory.promote, memory.cross_promote): one row per
-- namespace and key of a promoted row, the head of (org, namespace, '-', '_shared', '-',
-- key) in loom.memory_current. The promoted row is a revision like any other (sealed,
-- on the topic, erasable); this table indexes where each came from, so a demote, an
-- erasure of the source namespace and namespace.inventory find them without reading
-- every head. It holds no text: identities, ids, versions and who promoted.
CREATE TABLE loom.shared (
    org               text        NOT NULL,
    namespace         text        NOT NULL,
    memory_key        text        NOT NULL,
    memory_id         uuid        NOT NULL,
    seq               bigint      NOT NULL,
    source_namespace  text        NOT NULL,
    source_agent      text        NOT NULL,
    source_user_id    text        NOT NULL,
    source_session_id text        NOT NULL,
    source_key        text        NOT NULL,
    source_memory_id  uuid        NOT NULL,
    source_version    bigint      NOT NULL,
    promoted_by       text        NOT NULL,
    promoted_at       timestamptz NOT NULL DEFAULT now(),
    demoted_at        timestamptz,
    demoted_by        text,
    PRIMARY KEY (org, namespace, memory_key)
);
-- An erasure of a namespace finds the copies promoted from it into other namespaces.
CREATE INDEX shared_by_source ON loom.shared (org, source_namespace);
