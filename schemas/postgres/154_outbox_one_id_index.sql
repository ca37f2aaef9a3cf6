-- The outbox keeps one index on id (issue 35, the write's WAL). Every commit's row went
-- into two: outbox_pending (id, unparked rows) and outbox_by_id (unique on id, from
-- migration 117), each an index entry in the commit's WAL and one more for the relay's
-- delete to leave behind. Every statement that reaches a row by id reaches an unparked
-- one (the relay's delete after Kafka acked it, its count of a refusal, its parking),
-- and now says so, so outbox_pending serves them all; the ids come from the sequence,
-- which keeps them unique without the index. A parked row is reached by its namespace
-- (the primary key: a republish, an erasure) or counted by health.
DROP INDEX loom.outbox_by_id;
