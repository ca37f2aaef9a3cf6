-- The verifiable audit trail (memory-architecture, "Audit rows"): each audit row
-- carries the hash of the namespace's previous audit row (prev_hash) and its own
-- (row_hash: SHA-256 over prev_hash and the row's canonical fields, internal/auditchain).
-- The projector computes both from the topic's records in seq order, so a replay
-- writes the same hashes. Rows written before this migration hold '' in both.
ALTER TABLE loom.audit_log
    ADD COLUMN prev_hash String DEFAULT '',
    ADD COLUMN row_hash String DEFAULT '';
