-- Rules about the agent itself (about="agent"; internal/learnings): memory.set_from_messages'
-- loom.bulk_write step files each to loom.learnings_queue as a pending candidate, never as
-- a memory, and adds a row with the user's quote to loom.learnings_supporters, in the
-- transaction that commits the facts. A candidate carries no user_id; a supporter
-- carries the identity tuple (its agent the bot the rule was said to). Both texts are
-- kept only sealed (AES-256-CBC under HMAC-SHA256(data key, 'loom.learning')), each
-- row under a data key of its own kept wrapped under the KEK on the row alone, so a
-- delete destroys the key. generation is the namespace's generation when the row
-- committed, so an erasure's fence takes the rows committed before it.
CREATE TABLE loom.learnings_queue (
    org          text        NOT NULL,
    namespace    text        NOT NULL,
    candidate_id uuid        NOT NULL,
    agent        text        NOT NULL,
    source       text        NOT NULL CHECK (source IN ('assistant_turn')),
    status       text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending')),
    generation   bigint      NOT NULL,
    data_key     bytea       NOT NULL,
    sealed       bytea       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org, namespace, candidate_id)
);
CREATE INDEX learnings_queue_recent ON loom.learnings_queue (org, namespace, created_at DESC);

CREATE TABLE loom.learnings_supporters (
    org           text        NOT NULL,
    namespace     text        NOT NULL,
    candidate_id  uuid        NOT NULL,
    agent         text        NOT NULL,
    user_id       text        NOT NULL,
    session_id    text        NOT NULL,
    message_index integer     NOT NULL CHECK (message_index >= 0),
    generation    bigint      NOT NULL,
    data_key      bytea       NOT NULL,
    sealed        bytea       NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org, namespace, candidate_id, user_id, session_id, message_index)
);
-- A user's supporters across namespaces (an erasure of a user finds its namespaces).
CREATE INDEX learnings_supporters_user ON loom.learnings_supporters (org, user_id);
