-- The profile_consolidation pass (workers/profile_consolidation.go) reads, each pass,
-- the namespaces that opt in to profile sections whose configuration was stored since
-- its last read (internal/profiles.OptedInSince): a partial index over the few that opt
-- in, so the read does not scan every namespace of every org.
CREATE INDEX IF NOT EXISTS namespaces_profile_consolidation ON loom.namespaces (updated_at)
    WHERE config @> '{"profile_consolidation": true}' AND deleted_at IS NULL;
