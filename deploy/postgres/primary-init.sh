#!/bin/bash
# Runs once, when the primary's data directory is initialised (docker-entrypoint-initdb.d):
# a replication role for the standby, a pg_hba line letting it stream, and the standby
# named in synchronous_standby_names. The last is written with ALTER SYSTEM, so it takes
# effect when the server restarts after initialisation: during initialisation no
# standby exists, and a commit that waited for one would wait for ever.
set -euo pipefail
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" <<SQL
CREATE ROLE replicator WITH REPLICATION LOGIN PASSWORD '${LOOM_REPLICATION_PASSWORD}';
-- Loom reads pg_stat_replication at boot to see whether the standby is attached.
GRANT pg_monitor TO ${POSTGRES_USER};
ALTER SYSTEM SET synchronous_standby_names = 'FIRST 1 (loom_standby)';
SQL
echo "host replication replicator all scram-sha-256" >> "$PGDATA/pg_hba.conf"
