-- The own_session token scope: a token bound to one session (read_session_id) reads
-- and writes that session's rows alone, and is refused what acts on every session.
ALTER TABLE loom.api_tokens ADD COLUMN read_session_id text;
