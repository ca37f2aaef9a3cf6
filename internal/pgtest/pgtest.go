// Package pgtest opens the databases of the tests that run over a Postgres alone
// (devstack.RunWithPostgres in their TestMain): each test a fresh one of its own.
package pgtest

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/devstack"
	"github.com/loomplane/loom/internal/pg"
	pgmigrations "github.com/loomplane/loom/schemas/postgres"
)

// Pool opens an empty database of p named after tb (made again if a run left it), closed
// when tb ends.
func Pool(tb testing.TB, p *devstack.Postgres) *pgxpool.Pool {
	tb.Helper()
	ctx := context.Background()
	name := "t_" + strings.ToLower(strings.NewReplacer("/", "_", "-", "_").Replace(tb.Name()))
	dsn, err := p.FreshDatabase(ctx, name)
	if err != nil {
		tb.Fatal(err)
	}
	pool, err := pg.Open(ctx, pg.PoolConfig{DSN: dsn})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// Migrated is Pool with Loom's schema, and a user reference key and a name wrap key
// made for each of orgs (raw, as without LOOM_KEK: a commit makes an org's keys first,
// and the rows these tests write name their users by reference through
// loom.named_user).
func Migrated(tb testing.TB, p *devstack.Postgres, orgs ...string) *pgxpool.Pool {
	tb.Helper()
	pool := Pool(tb, p)
	ctx := context.Background()
	if _, err := pg.Migrate(ctx, pool, pgmigrations.Files, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		tb.Fatal(err)
	}
	for _, org := range orgs {
		if _, err := pool.Exec(ctx, `WITH ref AS (INSERT INTO loom.user_ref_keys (org, key) VALUES ($1, gen_random_bytes(32)))
			INSERT INTO loom.name_wrap_keys (org, gen, key) VALUES ($1, 1, gen_random_bytes(32))`, org); err != nil {
			tb.Fatal(err)
		}
	}
	return pool
}
