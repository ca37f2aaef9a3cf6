-- The audit chain's canonical encoding of each row (internal/auditchain, chain.go):
-- 1 hashes the row's agent and session id in the clear, as every row written before
-- this migration does; 2 (rows from records of envelope version 3 on) leaves them to
-- the subject commitment, so an erasure scrubs them with the row's key, content hash
-- and user id and the chain still verifies.
ALTER TABLE loom.audit_log
    ADD COLUMN chain_format UInt8 DEFAULT 1;
