-- Session digests (internal/evidence, the workers role's session_digest pass): per
-- user's session, a digest of its turns up to window_end (the message index of the
-- last turn it read), written by one model call over the digest before it and the
-- turns since. The newest digest of a session supersedes the ones before it, which the
-- pass deletes in the transaction that writes it. The text is kept only sealed
-- (AES-256-CBC under HMAC-SHA256(data key, 'loom.digest')), under a data key of its own
-- kept wrapped under the KEK on the row alone: deleting the row destroys the key. seq
-- is the seq of the memory.turns_observed record of the last turn the digest read, so
-- an erasure's fence takes the digests of the turns it takes (internal/erasure's row
-- scope).
CREATE TABLE loom.session_summaries (
    org          text        NOT NULL,
    namespace    text        NOT NULL,
    user_id      text        NOT NULL,
    session_id   text        NOT NULL,
    window_end   integer     NOT NULL CHECK (window_end >= 0),
    turns        integer     NOT NULL CHECK (turns > 0),
    seq          bigint      NOT NULL,
    model        text        NOT NULL,
    data_key     bytea       NOT NULL,
    sealed       bytea       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org, namespace, user_id, session_id, window_end)
);
-- A user's digests across namespaces (an erasure of a user finds its namespaces).
CREATE INDEX session_summaries_user ON loom.session_summaries (org, user_id);
-- The sessions with recent turns (the digest pass's look for owed sessions).
CREATE INDEX memory_evidence_created ON loom.memory_evidence (created_at);
