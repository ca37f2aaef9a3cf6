-- A knowledge document may be written on a user's behalf (issue 31): the request's
-- user_id, or a token bound to a user writing as that user. The user is kept as every
-- user column is (migration 155): its reference, loom.named_user(org, id) to write,
-- loom.user_ref(org, id) to compare, loom.user_name(org, ref) to answer the id; '' for
-- a document of the namespace's, which no user owns. A source keeps the user of its
-- first version (knowledge/command refuses a write for another), so a head's user is
-- each of its revisions' user.
--
-- The erasure's scopes (internal/erasure's registry) select a user's heads, revisions,
-- jobs (their files with them) and catalog rows by these columns; a namespace's
-- documents stay through a user's erasure.
ALTER TABLE loom.knowledge_heads ADD COLUMN user_id text NOT NULL DEFAULT '';
ALTER TABLE loom.knowledge_revisions ADD COLUMN user_id text NOT NULL DEFAULT '';
ALTER TABLE loom.knowledge_jobs ADD COLUMN user_id text NOT NULL DEFAULT '';
ALTER TABLE loom.knowledge_datasets ADD COLUMN user_id text NOT NULL DEFAULT '';

-- A user's erasure across the org finds the namespaces holding the user's documents
-- and jobs (command's erasureNamespaces).
CREATE INDEX knowledge_revisions_by_user ON loom.knowledge_revisions (org, user_id) WHERE user_id <> '';
CREATE INDEX knowledge_jobs_by_user ON loom.knowledge_jobs (org, user_id) WHERE user_id <> '';
