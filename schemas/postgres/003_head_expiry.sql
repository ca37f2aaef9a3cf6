-- The expiry sweep finds the heads whose expires_at has passed. The head's JSON
-- holds the time; a typed column beside it (set by every commit) can be indexed.

ALTER TABLE loom.memory_current ADD COLUMN expires_at timestamptz;
UPDATE loom.memory_current SET expires_at = (row->>'expires_at')::timestamptz WHERE row->>'expires_at' IS NOT NULL;
CREATE INDEX memory_current_expiry ON loom.memory_current (expires_at)
    WHERE expires_at IS NOT NULL AND NOT (row->>'tombstone')::boolean;

-- memory.bulk_set's hash-based duplicate detection finds the heads that already hold
-- an entry's exact value under another key.
CREATE INDEX memory_current_by_content ON loom.memory_current (org, namespace, content_sha256);
