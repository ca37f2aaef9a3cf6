-- memory.recall by question (internal/evidence/terms.go Candidates) reads the turns
-- sharing a hashed term with the question among a scope's 5,000 most recent. It walked
-- those 5,000 rows, heap and all, and kept the few hundred that shared a term: about
-- 5,000 heap tuples a question. A GIN index of the terms finds the sharing turns
-- directly; the most recent 5,000 are then only a cut (the 5,000th turn's time and
-- index, an index-only walk of memory_evidence_recent), and the heap is read for the
-- turns that can answer. fastupdate off: a pending list would be scanned whole by every
-- question until a vacuum folds it in; a turn pays its ~10 entries' inserts instead.
-- The terms' hashes are keyed by org, so another org's turns never share one; another
-- namespace's turns of the same org are rechecked and dropped.
CREATE INDEX memory_evidence_terms ON loom.memory_evidence USING gin (terms) WITH (fastupdate = off);
-- Turns kept before the terms column (NULL terms), which recall opens and matches by
-- their text: none are written now, so the index costs a new turn nothing.
CREATE INDEX memory_evidence_unindexed ON loom.memory_evidence (org, namespace) WHERE terms IS NULL;
