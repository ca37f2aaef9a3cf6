-- The reflection_distill pass (workers/reflection_distill.go, internal/reflections):
-- per user's session, the outcome label one model call gave the session's recent turns
-- up to window_end (the message index of the last turn it read), and how many
-- reflection memories it distilled (written as memory rows of type reflection, hidden
-- from unfiltered search). A label, no text: the reflections are memory rows. A session
-- whose last turn is past window_end is owed again. seq is the seq of that turn's
-- memory.turns_observed record, so an erasure's fence takes the labels of the turns it
-- takes (internal/erasure's row scope).
CREATE TABLE loom.session_outcomes (
    org          text        NOT NULL,
    namespace    text        NOT NULL,
    user_id      text        NOT NULL,
    session_id   text        NOT NULL,
    window_end   integer     NOT NULL CHECK (window_end >= 0),
    seq          bigint      NOT NULL,
    outcome      text        NOT NULL CHECK (outcome IN ('achieved', 'failed', 'mixed', 'unclear')),
    reflections  integer     NOT NULL CHECK (reflections >= 0),
    model        text        NOT NULL,
    labelled_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org, namespace, user_id, session_id)
);
-- A user's labels across namespaces (an erasure of a user finds its namespaces).
CREATE INDEX session_outcomes_user ON loom.session_outcomes (org, user_id);
