-- namespace.delete is a soft delete: the namespace's rows stay, but it is neither read
-- (its reads and writes answer 404) nor judged (the workers leave its queued items
-- owed) until a PUT /v1/namespaces/{ns} registers it again, which clears deleted_at.
ALTER TABLE loom.namespaces ADD COLUMN deleted_at timestamptz;
ALTER TABLE loom.namespaces ADD COLUMN deleted_by text;
