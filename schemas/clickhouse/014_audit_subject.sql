-- The audit chain's subject commitment (internal/auditchain, subject.go): a salted
-- SHA-256 of the revision's memory key, content hash and user id, which the chain
-- hashes and an erasure leaves (subject_commitment), and its salt, which an erasure
-- scrubs with the three fields (subject_salt). Rows written before hold '' in both and
-- hash as they did.
ALTER TABLE loom.audit_log
    ADD COLUMN subject_commitment String DEFAULT '',
    ADD COLUMN subject_salt String DEFAULT '';
