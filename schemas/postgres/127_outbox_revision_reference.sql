-- A revision's outbox record no longer copies what the journal holds (issue 35). The
-- record's sealed content (the memory's text and vectors under AES-GCM, base64: about
-- 6.5 kB of the row at 384 dimensions) was written to the outbox beside the journal's
-- own sealed copy of the text, flushed to the WAL with every commit, and deleted by the
-- relay. A revision's row now keeps its envelope with a stand-in for the sealed content
-- (events.StubSealed: the plain fields stay readable, as an erasure's scope reads them)
-- and, in `vectors`, the one part the journal lacks: the value's, the key's and a long
-- value's chunks' vectors, raw float32, sealed under the revision's data key
-- (rowseal, label loom.vectors). The relay seals the content as it publishes, from
-- loom.memory_revisions' row of the same (org, namespace, seq) and this column, in the
-- read it already makes (internal/outbox.Complete). NULL: `value` is the whole record
-- (every other kind, and what a republish queues).
ALTER TABLE loom.outbox ADD COLUMN vectors bytea;
-- Ciphertext does not compress: a row past a page (a long value's chunk vectors) moves
-- it out without trying.
ALTER TABLE loom.outbox ALTER COLUMN vectors SET STORAGE EXTERNAL;
