package app

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/pg"
	pgmigrations "github.com/loomplane/loom/pg_migrations"
	chmigrations "github.com/loomplane/loom/schemas/clickhouse"
)

// checkDurability applies LOOM_PG_DURABILITY to what the primary says about its
// synchronous standbys. Loom's own sessions set synchronous_commit = on, so a
// configured synchronous standby is what makes an acknowledged write survive the
// primary's loss; without one, synchronous mode refuses to start.
func (n *Process) checkDurability(ctx context.Context) error {
	rep, err := pg.ReadReplication(ctx, n.PG)
	if err != nil {
		return err
	}
	mode := n.Cfg.PG.Durability
	switch {
	case rep.StandbyNames == "" && mode == config.DurabilitySynchronous:
		return errors.New("LOOM_PG_DURABILITY=synchronous, but the Postgres primary has no synchronous standby configured " +
			"(synchronous_standby_names is empty): configure one, or set LOOM_PG_DURABILITY=local to accept writes durable on one server")
	case rep.StandbyNames == "":
		n.Log.Warn("no synchronous standby is configured: an acknowledged write is durable on the primary alone", "durability", mode)
	case !rep.StatsVisible:
		n.Log.Warn("cannot see pg_stat_replication's details (grant pg_monitor to Loom's role): whether a synchronous standby is attached is unknown",
			"synchronous_standby_names", rep.StandbyNames)
	case rep.SyncAttached == 0:
		n.Log.Warn("a synchronous standby is configured but none is attached: commits wait until one attaches",
			"synchronous_standby_names", rep.StandbyNames, "durability", mode)
	}
	return nil
}

// migrationState is what this build carries that the stores have not applied. A
// process that may not migrate (LOOM_BOOT_MIGRATE=0) serves nothing but health while
// anything is pending, and serves as soon as another process has applied it.
type migrationState struct {
	mu      sync.Mutex
	pending []string
	checked time.Time
	clear   bool // everything was applied once: migrations are never unapplied
}

// pendingMigrations lists what the stores have not applied, "pg:" and "ch:" prefixed;
// a ledger that cannot be read is listed as "<ledger unreadable>".
func (n *Process) pendingMigrations(ctx context.Context) []string {
	var out []string
	if names, err := pg.Pending(ctx, n.PG, pgmigrations.Files); err != nil {
		out = append(out, "pg:<ledger unreadable>")
	} else {
		for _, name := range names {
			out = append(out, "pg:"+name)
		}
	}
	if names, err := ch.Pending(ctx, n.CH, chmigrations.Files); err != nil {
		out = append(out, "ch:<ledger unreadable>")
	} else {
		for _, name := range names {
			out = append(out, "ch:"+name)
		}
	}
	return out
}

// refreshMigrations re-reads the ledgers when the last look is older than maxAge and
// returns what is pending.
func (n *Process) refreshMigrations(ctx context.Context, maxAge time.Duration) []string {
	m := &n.migrations
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.clear || time.Since(m.checked) < maxAge {
		return m.pending
	}
	m.pending = n.pendingMigrations(ctx)
	m.checked = time.Now()
	m.clear = len(m.pending) == 0
	return m.pending
}

// lastPending is the last known pending list, without reading the stores (liveness).
func (n *Process) lastPending() []string {
	n.migrations.mu.Lock()
	defer n.migrations.mu.Unlock()
	return append([]string{}, n.migrations.pending...)
}

// refuseUntilMigrated answers 503 MIGRATIONS_PENDING on every data route while a
// migration this build needs is not applied.
func (n *Process) refuseUntilMigrated(c *fiber.Ctx) error {
	if pending := n.refreshMigrations(c.UserContext(), time.Second); len(pending) > 0 {
		return (&httperr.Error{Status: http.StatusServiceUnavailable, Code: httperr.CodeMigrationsPending,
			Message:   "this process waits for migrations it may not apply (LOOM_BOOT_MIGRATE=0); retry",
			Retryable: true, RetryAfter: 5 * time.Second}).With("pending_migrations", pending)
	}
	return c.Next()
}

// waitMigrated holds a background role back until nothing is pending.
func (n *Process) waitMigrated(ctx context.Context, role string) error {
	for logged := false; ; logged = true {
		pending := n.refreshMigrations(ctx, 0)
		if len(pending) == 0 {
			return nil
		}
		if !logged {
			n.Log.Warn("waiting for migrations before starting", "role", role, "pending_migrations", pending)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}
