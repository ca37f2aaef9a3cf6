-- Search's served hits, counted beside memory.touch's touches (query/recalls_store.go)
-- and folded by the usage_fold pass into the row's recall_count, exactly as touches are
-- folded into reinforcement_count: the fold subtracts what it folded in the transaction
-- that commits the row. A row may now hold recalls and no touch.
ALTER TABLE loom.memory_touches ADD COLUMN recalls integer NOT NULL DEFAULT 0 CHECK (recalls >= 0);
