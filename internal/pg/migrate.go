package pg

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/migrate"
)

const ledgerDDL = `
CREATE SCHEMA IF NOT EXISTS loom;
CREATE TABLE IF NOT EXISTS loom.pg_migrations (
    filename   text        PRIMARY KEY,
    sha256     text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);`

// Migrate applies the pending files of fsys under a session advisory lock, each in
// one transaction together with its ledger row. It returns the names it applied.
func Migrate(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS, log *slog.Logger) ([]string, error) {
	files, err := migrate.Load(fsys)
	if err != nil {
		return nil, err
	}
	unlock, err := SessionLock(ctx, pool, LockPGMigrations)
	if err != nil {
		return nil, err
	}
	defer unlock()

	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquire a migration connection: %w", err)
	}
	defer conn.Release()
	// A long DDL runs to its end, but one that cannot take its lock is retried
	// rather than holding every read and write of its table behind it.
	if _, err := conn.Exec(ctx, "SET statement_timeout = 0; SET lock_timeout = '5s'"); err != nil {
		return nil, fmt.Errorf("set migration timeouts: %w", err)
	}
	if err := conn.Conn().PgConn().Exec(ctx, ledgerDDL).Close(); err != nil {
		return nil, fmt.Errorf("create loom.pg_migrations: %w", err)
	}
	plan, err := planAgainstLedger(ctx, pool, files)
	if err != nil {
		return nil, err
	}
	for _, n := range plan.Newer {
		log.Warn("Postgres migration from a newer build is applied; serving on its schema", "file", n)
	}
	var applied []string
	for _, f := range plan.Pending {
		if err := applyPG(ctx, conn, f); err != nil {
			return applied, err
		}
		log.Info("applied Postgres migration", "file", f.Name)
		applied = append(applied, f.Name)
	}
	if _, err := conn.Exec(ctx, "RESET statement_timeout; RESET lock_timeout"); err != nil {
		return applied, fmt.Errorf("reset migration timeouts: %w", err)
	}
	return applied, nil
}

func applyPG(ctx context.Context, conn *pgxpool.Conn, f migrate.File) error {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return fmt.Errorf("begin migration %s: %w", f.Name, err)
		}
		err = tx.Conn().PgConn().Exec(ctx, f.SQL).Close()
		if err == nil {
			_, err = tx.Exec(ctx, "INSERT INTO loom.pg_migrations (filename, sha256) VALUES ($1, $2)", f.Name, f.SHA256)
		}
		if err == nil {
			err = tx.Commit(ctx)
		}
		if err == nil {
			return nil
		}
		tx.Rollback(ctx)
		lastErr = err
		if !Conflict(err) {
			break
		}
		time.Sleep(time.Duration(attempt+1) * time.Second)
	}
	return fmt.Errorf("apply Postgres migration %s: %w", f.Name, lastErr)
}

// planAgainstLedger compares files with the ledger of applied migrations.
func planAgainstLedger(ctx context.Context, pool *pgxpool.Pool, files []migrate.File) (migrate.Plan, error) {
	ledger, err := readLedger(ctx, pool)
	if err != nil {
		return migrate.Plan{}, err
	}
	return migrate.Compare(files, ledger)
}

func readLedger(ctx context.Context, pool *pgxpool.Pool) ([]migrate.Applied, error) {
	rows, err := pool.Query(ctx, "SELECT filename, sha256 FROM loom.pg_migrations ORDER BY filename")
	if err != nil {
		return nil, fmt.Errorf("read loom.pg_migrations: %w", err)
	}
	defer rows.Close()
	var out []migrate.Applied
	for rows.Next() {
		var a migrate.Applied
		if err := rows.Scan(&a.Name, &a.SHA256); err != nil {
			return nil, fmt.Errorf("read loom.pg_migrations: %w", err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// Pending lists the files of fsys the database has not applied (readiness).
func Pending(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS) ([]string, error) {
	files, err := migrate.Load(fsys)
	if err != nil {
		return nil, err
	}
	plan, err := planAgainstLedger(ctx, pool, files)
	if err != nil {
		return nil, err
	}
	return plan.PendingNames(), nil
}
