-- recall_count (memory-architecture, usage_fold: "absolute evidence_count / recall_count
-- on memory"): the times search served a memory, which the usage fold folds into the
-- row on the authority (workers/usage_fold.go) and the projector carries from the
-- revision, so the history reads (memory.get and memory.list ?as_of) answer it as the
-- authority's reads do.

ALTER TABLE loom.memory ADD COLUMN recall_count UInt32 DEFAULT 0;

ALTER TABLE loom.memory_versions ADD COLUMN recall_count UInt32 DEFAULT 0;
