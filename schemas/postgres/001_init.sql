-- Loom's Postgres authority: heads, the revision journal, the outbox that feeds the
-- topic, and the state the query side's barrier reads. Every tenant key leads with org.

CREATE SCHEMA IF NOT EXISTS loom;

-- The recorded authority: which deployment this database serves.
CREATE TABLE loom.authority (
    singleton     boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    authority     text        NOT NULL DEFAULT 'postgres',
    deployment_id text        NOT NULL,
    epoch         bigint      NOT NULL DEFAULT 1,
    recorded_at   timestamptz NOT NULL DEFAULT now()
);

-- A namespace's last revision number (scope = namespace), or a policy generation
-- (scope '*'). Advancing it locks the row: that lock orders a namespace's commits.
CREATE TABLE loom.scope_generations (
    org        text        NOT NULL,
    scope      text        NOT NULL,
    generation bigint      NOT NULL DEFAULT 0 CHECK (generation >= 0),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org, scope)
);

-- The head of every key: the complete memory row as JSON.
CREATE TABLE loom.memory_current (
    org            text        NOT NULL,
    namespace      text        NOT NULL,
    agent          text        NOT NULL,
    user_id        text        NOT NULL,
    session_id     text        NOT NULL,
    memory_key     text        NOT NULL,
    memory_id      uuid        NOT NULL,
    version        bigint      NOT NULL,
    seq            bigint      NOT NULL,
    content_sha256 text        NOT NULL,
    row            jsonb       NOT NULL,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org, namespace, agent, user_id, session_id, memory_key)
);
-- A memory id is not unique within an org (a restored namespace keeps its ids).
CREATE INDEX memory_current_by_id ON loom.memory_current (org, memory_id);

-- Every committed revision, append-only, with its hash-only audit row.
CREATE TABLE loom.memory_revisions (
    org            text        NOT NULL,
    namespace      text        NOT NULL,
    seq            bigint      NOT NULL,
    event_type     text        NOT NULL,
    op             text        NOT NULL,
    agent          text        NOT NULL,
    user_id        text        NOT NULL,
    session_id     text        NOT NULL,
    memory_key     text        NOT NULL,
    memory_id      uuid        NOT NULL,
    version        bigint      NOT NULL,
    content_sha256 text        NOT NULL,
    status         text        NOT NULL,
    row            jsonb,
    audit          jsonb       NOT NULL,
    redacted_at    timestamptz,
    committed_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org, namespace, seq)
);
CREATE INDEX memory_revisions_by_key ON loom.memory_revisions
    (org, namespace, agent, user_id, session_id, memory_key, version);

-- The per-revision data key that seals the revision's content on the topic.
-- Redaction and erasure delete keys; the log then never yields that text again.
CREATE TABLE loom.revision_keys (
    org        text        NOT NULL,
    namespace  text        NOT NULL,
    seq        bigint      NOT NULL,
    data_key   bytea       NOT NULL CHECK (octet_length(data_key) = 32),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org, namespace, seq)
);

-- Encoded Kafka records not yet published. The relay deletes a row once Kafka acked it.
CREATE TABLE loom.outbox (
    id          bigserial   PRIMARY KEY,
    org         text        NOT NULL,
    namespace   text        NOT NULL,
    seq         bigint      NOT NULL,
    topic       text        NOT NULL,
    record_key  bytea       NOT NULL,
    headers     jsonb       NOT NULL,
    value       bytea       NOT NULL,
    attempts    integer     NOT NULL DEFAULT 0,
    last_error  text,
    parked_at   timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX outbox_pending ON loom.outbox (id) WHERE parked_at IS NULL;

-- Idempotency keys: request digest, state, lease and token, committed revisions, answer.
CREATE TABLE loom.idempotency (
    org            text        NOT NULL,
    key_hash       bytea       NOT NULL,
    op             text        NOT NULL,
    request_digest bytea       NOT NULL,
    state          text        NOT NULL CHECK (state IN ('running', 'committed', 'done')),
    lease_until    timestamptz NOT NULL,
    token          bigint      NOT NULL,
    revisions      jsonb,
    answer         jsonb,
    created_at     timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz NOT NULL,
    PRIMARY KEY (org, key_hash)
);
CREATE INDEX idempotency_expiry ON loom.idempotency (expires_at);

-- The highest seq a projection has written to ClickHouse, per namespace.
CREATE TABLE loom.projection_watermarks (
    projection text        NOT NULL,
    org        text        NOT NULL,
    namespace  text        NOT NULL,
    seq        bigint      NOT NULL CHECK (seq >= 0),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (projection, org, namespace)
);

-- API tokens, stored as SHA-256 of the secret. The token decides the org, the
-- namespaces it reaches (NULL: all of the org's) and its read scope.
CREATE TABLE loom.api_tokens (
    token_id     text        PRIMARY KEY,
    token_sha256 bytea       NOT NULL UNIQUE,
    org          text        NOT NULL,
    role         text        NOT NULL CHECK (role IN ('admin', 'writer', 'reader')),
    namespaces   text[],
    read_user_id text,
    name         text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz
);
CREATE INDEX api_tokens_by_org ON loom.api_tokens (org);
