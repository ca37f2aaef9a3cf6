-- loom.memory_touches.lease_until was made for a fold that leased counts (082); the fold
-- is a topic consumer now (usage_publish takes the counts out of the table in the
-- transaction that queues their record), so nothing leases a count and nothing read the
-- column.
ALTER TABLE loom.memory_touches DROP COLUMN lease_until;
