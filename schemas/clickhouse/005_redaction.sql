-- Redaction marks the history and current rows it scrubbed, so a read answers
-- redacted: true with no value instead of an empty one.

ALTER TABLE loom.memory_versions ADD COLUMN redacted UInt8 DEFAULT 0;

ALTER TABLE loom.memory ADD COLUMN redacted UInt8 DEFAULT 0;
