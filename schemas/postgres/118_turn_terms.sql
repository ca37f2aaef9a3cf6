-- A blind index of each kept turn's words (internal/evidence/terms.go): the distinct
-- index terms of its text, each the first 8 bytes of HMAC-SHA256 under the org's term
-- key. memory.recall by question reads the recent turns sharing a term with the
-- question and opens those alone. NULL: a turn kept before this column, which recall
-- opens and matches by its text.
ALTER TABLE loom.memory_evidence ADD COLUMN terms bigint[];

-- A user's most recent turns in a namespace, in the order recall reads them: an index
-- scan that stops at its cap, where a sort of every turn of the namespace spilled to disk.
CREATE INDEX memory_evidence_recent ON loom.memory_evidence (org, namespace, user_id, occurred_at DESC, message_index DESC);
