package boot

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/tableset"
	chmigrations "github.com/loomplane/loom/schemas/clickhouse"
	pgmigrations "github.com/loomplane/loom/schemas/postgres"
)

// Migrate applies both stores' migrations this build carries, the ClickHouse ones
// under a Postgres lock so two processes never apply them at once, then gives every
// other set of the projection tables the columns they added (tableset.Align).
func Migrate(ctx context.Context, pool *pgxpool.Pool, conn *ch.Conn, log *slog.Logger) error {
	if _, err := pg.Migrate(ctx, pool, pgmigrations.Files, log); err != nil {
		return fmt.Errorf("migrate Postgres: %w", err)
	}
	lock := func(ctx context.Context) (func(), error) { return pg.SessionLock(ctx, pool, pg.LockCHMigrations) }
	if _, err := ch.Migrate(ctx, conn, chmigrations.Files, lock, log); err != nil {
		return fmt.Errorf("migrate ClickHouse: %w", err)
	}
	unlock, err := lock(ctx)
	if err != nil {
		return fmt.Errorf("lock ClickHouse migrations: %w", err)
	}
	defer unlock()
	aligned, err := tableset.Align(ctx, conn)
	for _, stmt := range aligned {
		log.Info("aligned a projection table set with the serving tables", "statement", stmt)
	}
	if err != nil {
		return fmt.Errorf("migrate ClickHouse: %w", err)
	}
	return nil
}

// Migrations is what this build carries that the stores have not applied. A process
// that may not migrate (LOOM_BOOT_MIGRATE=0) serves nothing but health while anything
// is pending, and serves as soon as another process has applied it.
type Migrations struct {
	pool *pgxpool.Pool
	conn *ch.Conn

	mu      sync.Mutex
	pending []string
	checked time.Time
	clear   bool // everything was applied once: migrations are never unapplied
}

// NewMigrations returns the migration state of the two stores; nothing is read yet.
func NewMigrations(pool *pgxpool.Pool, conn *ch.Conn) *Migrations {
	return &Migrations{pool: pool, conn: conn}
}

// read lists what the stores have not applied, "pg:" and "ch:" prefixed; a ledger
// that cannot be read is listed as "<ledger unreadable>".
func (m *Migrations) read(ctx context.Context) []string {
	out := []string{} // an empty list, not null, in every answer that carries it
	if names, err := pg.Pending(ctx, m.pool, pgmigrations.Files); err != nil {
		out = append(out, "pg:<ledger unreadable>")
	} else {
		for _, name := range names {
			out = append(out, "pg:"+name)
		}
	}
	if names, err := ch.Pending(ctx, m.conn, chmigrations.Files); err != nil {
		out = append(out, "ch:<ledger unreadable>")
	} else {
		for _, name := range names {
			out = append(out, "ch:"+name)
		}
	}
	return out
}

// Pending re-reads the ledgers when the last look is older than maxAge and returns
// what is pending.
func (m *Migrations) Pending(ctx context.Context, maxAge time.Duration) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.clear || time.Since(m.checked) < maxAge {
		return m.pending
	}
	m.pending = m.read(ctx)
	m.checked = time.Now()
	m.clear = len(m.pending) == 0
	return m.pending
}

// Last is the last known pending list, without reading the stores (liveness).
func (m *Migrations) Last() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string{}, m.pending...)
}

// Wait holds what would start before the migrations (a background role) back until
// nothing is pending, logging once that it waits.
func (m *Migrations) Wait(ctx context.Context, what string, log *slog.Logger) error {
	for logged := false; ; logged = true {
		pending := m.Pending(ctx, 0)
		if len(pending) == 0 {
			return nil
		}
		if !logged {
			log.Warn("waiting for migrations before starting", "role", what, "pending_migrations", pending)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}
