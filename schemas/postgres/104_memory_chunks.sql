-- Verbatim chunks of the conversation's record (internal/evidence, chunks.go): the
-- turns one call kept (memory.observe, memory.set_from_messages' inputs, memory.import),
-- cut in arrival order into chunks of consecutive turns, a turn longer than a chunk cut
-- into parts. memory.search's turns leg matches a query against them and answers each
-- chunk with its neighbour window of turns. A chunk's text is kept only sealed
-- (AES-256-CBC under HMAC-SHA256(data key, 'loom.chunk')), under a data key of its own
-- kept wrapped under the KEK on the row alone: deleting the row destroys the key. seq is
-- the seq of the memory.turns_observed record of its turns, so an erasure's fence takes
-- the chunks of the turns it takes (internal/erasure's row scope). The rows commit in
-- the transaction of their turns.
CREATE TABLE loom.memory_chunks (
    org          text        NOT NULL,
    namespace    text        NOT NULL,
    chunk_id     uuid        NOT NULL,
    agent        text        NOT NULL,
    user_id      text        NOT NULL,
    session_id   text        NOT NULL,
    first_index  integer     NOT NULL CHECK (first_index >= 0),
    last_index   integer     NOT NULL CHECK (last_index >= first_index),
    part         integer     NOT NULL DEFAULT 0 CHECK (part >= 0),
    occurred_at  timestamptz NOT NULL,
    seq          bigint      NOT NULL,
    source       text        NOT NULL CHECK (source IN ('observe', 'extraction', 'import')),
    data_key     bytea       NOT NULL,
    sealed       bytea       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org, namespace, chunk_id)
);
-- The scope's recent chunks in the turns leg's order (its candidate read stops at
-- its limit, no sort).
CREATE INDEX memory_chunks_recent ON loom.memory_chunks (org, namespace, occurred_at DESC, first_index DESC, part DESC);
-- A user's chunks across namespaces (an erasure of a user finds its namespaces).
CREATE INDEX memory_chunks_user ON loom.memory_chunks (org, user_id);

-- A chunk's lineage: the turns it was cut from, in order (position). No text. A
-- redaction that forgets a turn forgets the chunks cut from it; an erasure deletes the
-- scope's links below its fence (seq: the turns record's seq).
CREATE TABLE loom.memory_chunk_sources (
    org        text    NOT NULL,
    namespace  text    NOT NULL,
    chunk_id   uuid    NOT NULL,
    turn_id    uuid    NOT NULL,
    position   integer NOT NULL CHECK (position >= 0),
    user_id    text    NOT NULL,
    seq        bigint  NOT NULL,
    PRIMARY KEY (org, namespace, chunk_id, turn_id)
);
CREATE INDEX memory_chunk_sources_turn ON loom.memory_chunk_sources (org, namespace, turn_id);
