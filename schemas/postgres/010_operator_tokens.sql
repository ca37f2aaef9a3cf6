-- The deployment operator's tokens (`loomd token create --operator`): role operator,
-- no org, no namespaces, no read user. An org's tokens keep naming their org.
ALTER TABLE loom.api_tokens DROP CONSTRAINT api_tokens_role_check;
ALTER TABLE loom.api_tokens ADD CONSTRAINT api_tokens_role_check CHECK (
    (role IN ('admin', 'writer', 'reader') AND org <> '')
    OR (role = 'operator' AND org = '' AND namespaces IS NULL AND read_user_id IS NULL));
