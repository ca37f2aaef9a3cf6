-- The embedder calibration of memory.set's thresholds: the recalibration pass
-- (workers/recalibration.go) records, beside a namespace's recalibrated search
-- backgrounds, the conflict and duplicate thresholds its measured background median
-- gives (command.KeepRecalibration; LOOM_CONFLICT_CALIBRATION_*), which memory.set
-- reads after the type's dedup_threshold and the namespace's conflict_threshold,
-- before LOOM_CONFLICT_THRESHOLD. Numbers, no content; null until a pass records them.
ALTER TABLE loom.search_calibration
    ADD COLUMN conflict_threshold double precision,
    ADD COLUMN duplicate_threshold double precision;

-- Evidence events (command/evidence_events.go): a restatement of a memory, a write
-- merged into it or a duplicate of it counts one here, beside memory.touch's touches
-- and search's recalls, and the usage fold folds the count into the row's
-- evidence_count in the transaction that commits it.
ALTER TABLE loom.memory_touches ADD COLUMN evidence integer NOT NULL DEFAULT 0 CHECK (evidence >= 0);
