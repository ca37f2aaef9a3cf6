-- The row state memory.set judges and search filters on: pins and locks, sensitivity,
-- validity and expiry, and the links a verdict leaves (supersession, duplicate,
-- conflict). Search documents carry them too, so no leg joins back to memory.

ALTER TABLE loom.memory
    ADD COLUMN pinned UInt8 DEFAULT 0,
    ADD COLUMN locked UInt8 DEFAULT 0,
    ADD COLUMN sensitivity String DEFAULT 'normal',
    ADD COLUMN valid_at Nullable(DateTime),
    ADD COLUMN valid_to Nullable(DateTime),
    ADD COLUMN expires_at Nullable(DateTime),
    ADD COLUMN on_expire String DEFAULT '',
    ADD COLUMN superseded_by String DEFAULT '',
    ADD COLUMN duplicate_of String DEFAULT '',
    ADD COLUMN conflict_with Array(String),
    ADD COLUMN judgement_owed UInt8 DEFAULT 0;

ALTER TABLE loom.memory_versions
    ADD COLUMN pinned UInt8 DEFAULT 0,
    ADD COLUMN locked UInt8 DEFAULT 0,
    ADD COLUMN sensitivity String DEFAULT 'normal',
    ADD COLUMN valid_at Nullable(DateTime),
    ADD COLUMN valid_to Nullable(DateTime),
    ADD COLUMN expires_at Nullable(DateTime),
    ADD COLUMN on_expire String DEFAULT '',
    ADD COLUMN superseded_by String DEFAULT '',
    ADD COLUMN duplicate_of String DEFAULT '',
    ADD COLUMN conflict_with Array(String),
    ADD COLUMN judgement_owed UInt8 DEFAULT 0;

ALTER TABLE loom.memory_embeddings
    ADD COLUMN pinned UInt8 DEFAULT 0,
    ADD COLUMN sensitivity String DEFAULT 'normal',
    ADD COLUMN valid_to Nullable(DateTime),
    ADD COLUMN expires_at Nullable(DateTime),
    ADD COLUMN key_embedding Array(Float32);
