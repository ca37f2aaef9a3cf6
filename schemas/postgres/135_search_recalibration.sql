-- The recalibration pass (workers/recalibration.go) rewrites a namespace's recorded
-- search backgrounds from its vectors and its usage, and stamps when: the pass takes
-- the namespaces never recalibrated, then the longest ago. A number, no content.
ALTER TABLE loom.search_calibration ADD COLUMN recalibrated_at timestamptz;
