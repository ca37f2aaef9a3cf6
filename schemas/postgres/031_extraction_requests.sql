-- Deferred memory.set_from_messages requests (internal/extractqueue): the authority on
-- each request's state, leases, attempts and backoff; the extraction workers consume
-- the request topic and claim rows here. The transcript is kept only sealed (payload,
-- AES-256-GCM under data_key, the same sealed bytes the topic record carries), and
-- both are cleared once the request is done: without its key no copy of the
-- transcript, on the topic or here, opens again. An erasure deletes the rows of its
-- scope requested below its fence (generation: the namespace's generation when the
-- request committed).
CREATE TABLE loom.extraction_requests (
    org             text        NOT NULL,
    queue_id        uuid        NOT NULL,
    namespace       text        NOT NULL,
    agent           text        NOT NULL,
    user_id         text        NOT NULL,
    session_id      text        NOT NULL,
    generation      bigint      NOT NULL,
    -- The enqueuing token: the worker writes as it, and the _mine operations read by it.
    token_id        text        NOT NULL,
    token_role      text        NOT NULL,
    read_user_id    text        NOT NULL DEFAULT '',
    status          text        NOT NULL CHECK (status IN ('pending', 'running', 'held', 'done', 'failed')),
    attempts        integer     NOT NULL DEFAULT 0,
    records         integer     NOT NULL DEFAULT 1,
    claim_token     bigint      NOT NULL DEFAULT 0,
    lease_until     timestamptz,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    queued_at       timestamptz NOT NULL DEFAULT now(),
    data_key        bytea       CHECK (data_key IS NULL OR octet_length(data_key) = 32),
    payload         bytea,
    messages        integer     NOT NULL,
    last_error      text,
    result          jsonb,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz,
    PRIMARY KEY (org, queue_id)
);
-- What search and memory.ask read for pending_extraction, and erasure's scope.
CREATE INDEX extraction_requests_open ON loom.extraction_requests (org, namespace, user_id)
    WHERE status IN ('pending', 'running', 'held');
-- What the workers' housekeeping reads: the open requests due another record.
CREATE INDEX extraction_requests_due ON loom.extraction_requests (next_attempt_at)
    WHERE status IN ('pending', 'running', 'held');
CREATE INDEX extraction_requests_by_namespace ON loom.extraction_requests (org, namespace, created_at);
CREATE INDEX extraction_requests_by_token ON loom.extraction_requests (org, token_id, created_at);
