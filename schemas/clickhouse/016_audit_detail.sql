-- A write's own audit row (events.AuditNote: a bulk write's batch, the conflict
-- resolver's decision) rides on the last record of its commit and lands beside that
-- revision's row, at the same seq under its own op. detail holds its account as JSON:
-- the members' seqs and memory ids, the verdict counts or the judged pairs; the chain
-- hashes it (internal/auditchain). A revision's row holds ''.
ALTER TABLE loom.audit_log
    ADD COLUMN detail String DEFAULT '';
