-- A namespace's search background, per embedder (query/calibrate.go): the median and
-- spread of the relevance a search's pool gives the documents that do not answer it,
-- for its last searches (at most 128, newest last). A search whose own pool is too
-- small to hold a background (a narrow filter) is judged against these. Numbers only:
-- no query, key or value.
CREATE TABLE loom.search_calibration (
    org        text        NOT NULL,
    namespace  text        NOT NULL,
    embedder   text        NOT NULL,
    samples    jsonb       NOT NULL,
    searches   bigint      NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org, namespace, embedder)
);
