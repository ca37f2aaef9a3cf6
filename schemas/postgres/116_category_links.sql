-- Category links (memory.assign_category): one row per memory key and category an
-- owner linked or rescinded. The link itself is the category in the row's tags, a
-- revision like any other (sealed, on the topic, erasable, replayable); this table
-- remembers which pairs were ever stored and which the owner rescinded, so a
-- memory.import adds only pairs never stored and a rescinded link stays rescinded. It
-- holds no text beyond the category name; an erasure deletes the scope's rows.
CREATE TABLE loom.category_links (
    org          text        NOT NULL,
    namespace    text        NOT NULL,
    agent        text        NOT NULL,
    user_id      text        NOT NULL,
    session_id   text        NOT NULL,
    memory_key   text        NOT NULL,
    category     text        NOT NULL,
    seq          bigint      NOT NULL,
    linked_by    text        NOT NULL,
    linked_at    timestamptz NOT NULL DEFAULT now(),
    rescinded_at timestamptz,
    rescinded_by text,
    PRIMARY KEY (org, namespace, agent, user_id, session_id, memory_key, category)
);
