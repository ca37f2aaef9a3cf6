-- The recorded authority (postgres-authority § Recorded authority): which deployment
-- this ClickHouse serves and which store holds its memory. Recorded once, by the first
-- boot with migrations on, with the deployment id Postgres records in loom.authority;
-- every later boot compares the two and refuses stores of different deployments.

CREATE TABLE IF NOT EXISTS loom.storage_authority (
    singleton     UInt8,
    authority     String,
    deployment_id String,
    epoch         UInt64,
    recorded_at   DateTime
) ENGINE = ReplacingMergeTree(epoch)
ORDER BY singleton;
