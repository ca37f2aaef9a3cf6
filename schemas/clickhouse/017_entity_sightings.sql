-- Entity sightings (issue 28): which record of which memory declared each spelling and
-- type of a name, so a redaction of a version can take the spellings and types only
-- that version declared. loom.entities keeps one row per (name, user, spelling, type),
-- replaced by the latest sighting, and so cannot say which version added a row; this
-- table keeps every sighting beside the others, keyed by the record's memory and seq,
-- so a replayed record writes the same row again and it collapses. The projector
-- writes it in the same batch as loom.entities, from the same sightings. Nothing here
-- can fill it for the records already projected (the history keeps neither the types
-- nor a relation's spelling): a projection reset or rebuild refills it from the topic,
-- and until then a redaction of a version older than the namespace's first sighting
-- takes names as before (internal/erasure's eraseOwnedEntities).
CREATE TABLE IF NOT EXISTS loom.entity_sightings (
    org         String,
    namespace   String,
    name        String,
    user_id     String,
    alias       String,
    entity_type String,
    memory_id   UUID,
    seq         UInt64
) ENGINE = ReplacingMergeTree()
ORDER BY (org, namespace, name, user_id, alias, entity_type, memory_id, seq);
