-- A parked pool's candidates move from a base64 string inside the pool column's jsonb to
-- a bytea column of their own, stored out of line and uncompressed (STORAGE EXTERNAL):
-- pglz compressing the 40 KB string was most of a search's Postgres CPU at 100k
-- memories (0.9 ms an insert against 0.07 ms as bytea). The blob is content hashes and
-- float64 scores, which barely compress. The pool column keeps the scopes the pool
-- names, for erasure's containment test; rows an older process parked keep their blob
-- in it and are still read.
ALTER TABLE loom.search_pages ADD COLUMN packed bytea;
ALTER TABLE loom.search_pages ALTER COLUMN packed SET STORAGE EXTERNAL;
