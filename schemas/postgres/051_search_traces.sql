-- memory.search_trace: the full trace of one search that asked for it (trace: true),
-- read back by id until expires_at (LOOM_SEARCH_TRACE_TTL_S). It is kept here rather
-- than in the process that ran the search because any query process may serve the
-- read. rows names every memory identity the trace holds, in loom.search_pages's
-- shape, so an erasure deletes the traces naming its scope; the trace itself holds
-- identities, scores and the query, never a memory's value. Expired rows are deleted
-- by the next trace written.
CREATE TABLE loom.search_traces (
    id         uuid        PRIMARY KEY,
    org        text        NOT NULL,
    namespaces text[]      NOT NULL,
    user_id    text        NOT NULL,
    rows       jsonb       NOT NULL,
    trace      jsonb       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE INDEX search_traces_expiry ON loom.search_traces (expires_at);
