-- observe.crystallize (POST /v1/namespaces/{ns}/turns:crystallize) runs the extraction
-- over a session's observed turns once: crystallized_at marks the turns a
-- crystallization has read, in the commit of the facts drawn from them.
ALTER TABLE loom.memory_evidence ADD COLUMN crystallized_at timestamptz;

CREATE INDEX memory_evidence_uncrystallized ON loom.memory_evidence (org, namespace, user_id, session_id, message_index)
	WHERE source = 'observe' AND crystallized_at IS NULL;
