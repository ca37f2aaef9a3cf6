-- Decision records (decision.record): who decided, why, and what the decision
-- supersedes, beside the decision memory (memory_type 'decision') the same commit
-- writes under the key. A delete of the decision retires its record in the delete's
-- own transaction (retired_at); recording it again brings it back. It holds no text:
-- the decision and its rationale are the memory's value, sealed as every row's text
-- is; an erasure deletes the record with the row.
CREATE TABLE loom.decision_records (
    org          text        NOT NULL,
    namespace    text        NOT NULL,
    agent        text        NOT NULL,
    user_id      text        NOT NULL,
    session_id   text        NOT NULL,
    memory_key   text        NOT NULL,
    memory_id    uuid        NOT NULL,
    version      bigint      NOT NULL,
    seq          bigint      NOT NULL,
    decided_by   text        NOT NULL,
    supersedes   text[]      NOT NULL DEFAULT '{}',
    recorded_by  text        NOT NULL,
    recorded_at  timestamptz NOT NULL DEFAULT now(),
    retired_at   timestamptz,
    retired_by   text,
    PRIMARY KEY (org, namespace, agent, user_id, session_id, memory_key)
);
