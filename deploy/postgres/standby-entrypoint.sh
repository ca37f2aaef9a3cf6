#!/bin/bash
# The synchronous standby: on first start, a base backup of the primary with -R
# (standby.signal and primary_conninfo), streaming as loom_standby, the name the
# primary's synchronous_standby_names waits for. Then the image's usual entrypoint.
set -euo pipefail
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  until pg_isready -h "$LOOM_PRIMARY_HOST" -U replicator; do sleep 1; done
  mkdir -p "$PGDATA" && chown postgres:postgres "$PGDATA" && chmod 0700 "$PGDATA"
  gosu postgres pg_basebackup -h "$LOOM_PRIMARY_HOST" -U replicator -D "$PGDATA" -R -X stream -c fast \
    -d "host=$LOOM_PRIMARY_HOST user=replicator application_name=loom_standby"
  echo "primary_conninfo = 'host=$LOOM_PRIMARY_HOST user=replicator password=$PGPASSWORD application_name=loom_standby'" \
    | gosu postgres tee -a "$PGDATA/postgresql.auto.conf" >/dev/null
fi
exec docker-entrypoint.sh postgres -c hot_standby=on
