-- A user's erasure finds the rows promoted from the user's memories by provenance
-- (command/cross_promote.go, withdrawUserPromotions).
CREATE INDEX shared_by_source_user ON loom.shared (org, source_user_id);
