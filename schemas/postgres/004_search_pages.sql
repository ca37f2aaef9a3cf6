-- A search's ranked pool, parked for its next pages: page_token names a row. The rows
-- hold identities and scores, never memory text; each page is checked against the
-- heads when it is served. Expired rows are swept.

CREATE TABLE loom.search_pages (
    id         uuid        PRIMARY KEY,
    org        text        NOT NULL,
    plan       jsonb       NOT NULL,
    pool       jsonb       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE INDEX search_pages_expiry ON loom.search_pages (expires_at);
