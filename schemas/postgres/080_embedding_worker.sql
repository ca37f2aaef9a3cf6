-- The embedding worker (workers/embedding_worker.go) queues in loom.worker_items the
-- revisions committed as embedding stubs (no vector: the embedder was down), one row per
-- stub version, and stamps each done once its vector is committed; a replay of its
-- consumer group finds the stamp and embeds nothing twice.
ALTER TABLE loom.worker_items DROP CONSTRAINT IF EXISTS worker_items_worker_check;
ALTER TABLE loom.worker_items ADD CONSTRAINT worker_items_worker_check
    CHECK (worker IN ('conflict_resolver', 'entity_extractor', 'embedding_worker'));
