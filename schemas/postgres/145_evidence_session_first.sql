-- A session's turns in order, led by the session rather than the user: a read of one
-- session's turns that names no user (context.pack's session layer for an admin's
-- pack with no user_id, recall's windows across a shared session) walked every
-- index entry of the namespace under memory_evidence_session (org, namespace,
-- user_id, session_id, ...), 50,000 at 50k turns; it now walks the session's. A read
-- naming the user as well matches both columns by equality, as before. The index
-- replaces the old one, so a turn keeps no more index bytes than it did.
CREATE INDEX memory_evidence_session_turns ON loom.memory_evidence (org, namespace, session_id, user_id, message_index, occurred_at);
DROP INDEX loom.memory_evidence_session;
