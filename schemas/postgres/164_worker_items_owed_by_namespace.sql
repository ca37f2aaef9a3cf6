-- A pass fed by namespace (workers/due_passes.go: recalibration, entity_communities,
-- session_digest, reflection_distill) owes one item per record, and gives a namespace's
-- items back due later when the namespace is not due (its interval, a projection
-- behind). Its feed queues a new item due no earlier than the namespace's items already
-- owed (workers/workqueue.go queueWork), so a write into a namespace that is not due
-- wakes no pass that would only give it back. That read is by worker and namespace over
-- the owed items alone: the done items of a namespace (kept 30 days as the records'
-- stamps) would make the primary key's prefix walk every stamp.
CREATE INDEX worker_items_owed_by_namespace ON loom.worker_items (worker, org, namespace, next_at) WHERE state = 'owed';
