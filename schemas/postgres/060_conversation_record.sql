-- The conversation's record (internal/evidence): the turns memory.observe appended,
-- memory.set_from_messages read and memory.import wrote, and which turns each memory
-- version was drawn from. memory.recall reads both. A turn's text and speaker are kept only sealed (sealed:
-- AES-256-CBC under HMAC-SHA256(data key, 'loom.turn'), as a memory row's text is
-- under 'loom.row'), under the data key of the memory.turns_observed record that
-- carried them, kept wrapped under the KEK on the row itself: an erasure deletes the
-- rows of its scope below its fence (seq: the record's seq, the namespace's
-- generation), and with them the only copies of the key, so neither the rows' dead
-- tuples nor the topic's copy open again.
CREATE TABLE loom.memory_evidence (
    org           text        NOT NULL,
    namespace     text        NOT NULL,
    turn_id       uuid        NOT NULL,
    agent         text        NOT NULL,
    user_id       text        NOT NULL,
    session_id    text        NOT NULL,
    role          text        NOT NULL CHECK (role IN ('user', 'assistant', 'system', 'tool')),
    message_index integer     NOT NULL CHECK (message_index >= 0),
    occurred_at   timestamptz NOT NULL,
    seq           bigint      NOT NULL,
    source        text        NOT NULL CHECK (source IN ('observe', 'extraction', 'import')),
    data_key      bytea       NOT NULL,
    sealed        bytea       NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org, namespace, turn_id)
);
-- A session's turns in order (recall's neighbour windows, a session's last turns).
CREATE INDEX memory_evidence_session ON loom.memory_evidence (org, namespace, user_id, session_id, message_index, occurred_at);
-- A user's turns across namespaces (an erasure of a user finds its namespaces).
CREATE INDEX memory_evidence_user ON loom.memory_evidence (org, user_id);

-- Belief sources: which turns a memory version was drawn from. No text: the memory's
-- id and version and the turn's id. An erasure deletes the scope's links below its
-- fence (seq: the turns record's seq of the turns they point at).
CREATE TABLE loom.memory_belief_sources (
    org         text        NOT NULL,
    namespace   text        NOT NULL,
    memory_id   uuid        NOT NULL,
    version     bigint      NOT NULL,
    turn_id     uuid        NOT NULL,
    user_id     text        NOT NULL,
    seq         bigint      NOT NULL,
    support     text        NOT NULL DEFAULT 'extracted_from',
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org, namespace, memory_id, version, turn_id)
);
CREATE INDEX memory_belief_sources_turn ON loom.memory_belief_sources (org, namespace, turn_id);
