-- memory.search_trace checks a session-bound token (own_session) against the session
-- the search was narrowed to, as it checks a user-bound token against user_id: ''
-- for a search of every session (a trace kept before this column reads as one).
ALTER TABLE loom.search_traces ADD COLUMN session_id text NOT NULL DEFAULT '';
