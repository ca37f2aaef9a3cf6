-- The per-org switch for model calls (PUT /v1/orgs/self/model-calls): a row holds the
-- org's model calls. While it exists no model call of the org is made (the provider's
-- allowance reads it: internal/llm/spend), the workers that call a model leave the
-- org's queued rows owed, and deferred extraction requests wait in status 'held'
-- until the row is deleted; nothing fails for it. No content: the org, when, and who.
CREATE TABLE loom.model_call_holds (
    org     text        PRIMARY KEY,
    held_at timestamptz NOT NULL DEFAULT now(),
    held_by text        NOT NULL
);
