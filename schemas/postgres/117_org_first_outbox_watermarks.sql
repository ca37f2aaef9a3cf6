-- The outbox and the projection watermarks keyed org-first, as every other tenant table
-- is (the seeds; issue 33, contradiction 12). The relay still takes the outbox in id
-- order and deletes by id (a unique index on id), and the projectors still read their
-- watermarks by projection (an index on projection); an erasure's withdrawal and a
-- barrier's read of one namespace's mark now range over the org's part of the key.
ALTER TABLE loom.outbox DROP CONSTRAINT outbox_pkey;
ALTER TABLE loom.outbox ADD PRIMARY KEY (org, namespace, id);
CREATE UNIQUE INDEX outbox_by_id ON loom.outbox (id);

ALTER TABLE loom.projection_watermarks DROP CONSTRAINT projection_watermarks_pkey;
ALTER TABLE loom.projection_watermarks ADD PRIMARY KEY (org, namespace, projection);
CREATE INDEX projection_watermarks_by_projection ON loom.projection_watermarks (projection);
