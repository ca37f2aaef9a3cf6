package pg

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Replication is what the primary says about its synchronous standbys at one moment.
type Replication struct {
	// StandbyNames is synchronous_standby_names: empty means no commit waits for a standby.
	StandbyNames string `json:"synchronous_standby_names"`
	// SyncAttached counts standbys streaming in sync or quorum state.
	SyncAttached int `json:"sync_standbys_attached"`
	// StatsVisible is false when this role may not read pg_stat_replication's details
	// (it needs pg_monitor or pg_read_all_stats), so SyncAttached cannot be trusted.
	StatsVisible bool `json:"replication_stats_visible"`
}

// ReadReplication reads synchronous_standby_names and pg_stat_replication.
func ReadReplication(ctx context.Context, pool *pgxpool.Pool) (Replication, error) {
	var r Replication
	err := pool.QueryRow(ctx, `SELECT current_setting('synchronous_standby_names'),
		(SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum'))::int,
		(SELECT rolsuper FROM pg_roles WHERE rolname = current_user) OR pg_has_role(current_user, 'pg_read_all_stats', 'USAGE')`).
		Scan(&r.StandbyNames, &r.SyncAttached, &r.StatsVisible)
	if err != nil {
		return r, fmt.Errorf("read synchronous_standby_names and pg_stat_replication: %w", err)
	}
	return r, nil
}
