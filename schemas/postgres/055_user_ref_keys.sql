-- Each org's user reference key: the HMAC-SHA256 key under which the topic's plain
-- fields name a user (user_ref, envelope version 2) instead of carrying the user id, so
-- a consumer groups and fences by user without learning who, and a guessed id cannot be
-- confirmed without the key. Made on the org's first write; never changed (a new key
-- would split every user in two on the topic).
CREATE TABLE loom.user_ref_keys (
    org        text        PRIMARY KEY,
    key        bytea       NOT NULL CHECK (octet_length(key) = 32),
    created_at timestamptz NOT NULL DEFAULT now()
);
