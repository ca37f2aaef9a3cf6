-- evidence_count (memory-architecture, usage_fold: "absolute evidence_count / recall_count
-- on memory"): the evidence events for a memory's statement (a restatement, a merge into
-- it, a duplicate of it), which the usage fold folds into the row on the authority
-- (workers/usage_fold.go) and the revision carries on the topic, so the projector writes
-- it and the history reads (memory.get and memory.list ?as_of) answer it as the
-- authority's reads do.

ALTER TABLE loom.memory ADD COLUMN evidence_count UInt32 DEFAULT 0;

ALTER TABLE loom.memory_versions ADD COLUMN evidence_count UInt32 DEFAULT 0;
