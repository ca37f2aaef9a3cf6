-- An outbox record stays in its row. A revision's record is a sealed envelope of about
-- 6.5 kB (its value's and key's vectors, base64 under AES-GCM), over the 2 kB past
-- which Postgres toasts a row: every commit tried to compress it (ciphertext does not
-- compress), wrote it as four chunks to the outbox's TOAST table and its index, and the
-- relay read them back and deleted them. Rows up to a page (8160 bytes) now stay inline;
-- a longer record (a long value's chunk vectors) still moves out, without the futile
-- compression.
ALTER TABLE loom.outbox SET (toast_tuple_target = 8160);
ALTER TABLE loom.outbox ALTER COLUMN value SET STORAGE EXTERNAL;
