// Package boot holds the checks a loomd process makes of its stores before it serves,
// whatever its roles: the durability Postgres promises (LOOM_PG_DURABILITY), the
// deployment both stores record (loom.authority, loom.storage_authority), and the
// migrations this build carries that the stores have not applied. README.md's "Boot
// checks" and docs/architecture.md describe them.
package boot

import (
	"context"
	"errors"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/pg"
)

// Durability applies mode to what the primary says about its synchronous standbys.
// Loom's own sessions set synchronous_commit = on, so a configured synchronous
// standby is what makes an acknowledged write survive the primary's loss; without one,
// synchronous mode refuses to start. What local mode accepts, and what synchronous
// mode can only wait for, is logged.
func Durability(ctx context.Context, pool *pgxpool.Pool, mode config.Durability, log *slog.Logger) error {
	rep, err := pg.ReadReplication(ctx, pool)
	if err != nil {
		return err
	}
	switch {
	case rep.StandbyNames == "" && mode == config.DurabilitySynchronous:
		return errors.New("LOOM_PG_DURABILITY=synchronous, but the Postgres primary has no synchronous standby configured " +
			"(synchronous_standby_names is empty): configure one, or set LOOM_PG_DURABILITY=local to accept writes durable on one server")
	case rep.StandbyNames == "":
		log.Warn("no synchronous standby is configured: an acknowledged write is durable on the primary alone", "durability", mode)
	case !rep.StatsVisible:
		log.Warn("cannot see pg_stat_replication's details (grant pg_monitor to Loom's role): whether a synchronous standby is attached is unknown",
			"synchronous_standby_names", rep.StandbyNames)
	case rep.SyncAttached == 0:
		log.Warn("a synchronous standby is configured but none is attached: commits wait until one attaches",
			"synchronous_standby_names", rep.StandbyNames, "durability", mode)
	}
	return nil
}
