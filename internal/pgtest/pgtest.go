// Package pgtest opens the databases of the tests that run over a Postgres alone
// (devstack.RunWithPostgres in their TestMain): each test a fresh one of its own.
package pgtest

import (
	"context"
	"io"
	"io/fs"
	"log/slog"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/devstack"
	"github.com/loomplane/loom/internal/kek"
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

// MigratedBefore is Pool with Loom's Postgres migrations numbered below n applied: a
// test stores rows the way a Loom of then stored them, then runs MigrateRest.
func MigratedBefore(tb testing.TB, p *devstack.Postgres, n string) *pgxpool.Pool {
	tb.Helper()
	pool := Pool(tb, p)
	if _, err := pg.Migrate(context.Background(), pool, MigrationsBefore(tb, n), slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		tb.Fatal(err)
	}
	return pool
}

// MigrateRest applies the rest of Loom's Postgres migrations to pool.
func MigrateRest(tb testing.TB, pool *pgxpool.Pool) {
	tb.Helper()
	if _, err := pg.Migrate(context.Background(), pool, pgmigrations.Files, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		tb.Fatal(err)
	}
}

// MigrationsBefore is Loom's Postgres migrations numbered below n: a test migrates a
// database to them, stores rows the way a Loom of then stored them, and runs the rest.
func MigrationsBefore(tb testing.TB, n string) fs.FS {
	tb.Helper()
	out := fstest.MapFS{}
	entries, err := fs.ReadDir(pgmigrations.Files, ".")
	if err != nil {
		tb.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".sql") || e.Name() >= n {
			continue
		}
		b, err := fs.ReadFile(pgmigrations.Files, e.Name())
		if err != nil {
			tb.Fatal(err)
		}
		out[e.Name()] = &fstest.MapFile{Data: b}
	}
	return out
}

// OrgKey is org's user reference key, unwrapped: what loom.user_ref, loom.key_ref,
// loom.agent_ref and loom.session_ref compute their references under.
func OrgKey(tb testing.TB, pool *pgxpool.Pool, org string) []byte {
	tb.Helper()
	var key []byte
	if err := pool.QueryRow(context.Background(), `SELECT loom.unwrapped_key(key) FROM loom.user_ref_keys WHERE org = $1`, org).Scan(&key); err != nil {
		tb.Fatalf("the org %s has no user reference key: %v", org, err)
	}
	return key
}

// WriterRefs are an agent's and a session's stored forms as Go computes them
// (events.AgentRef and SessionRef under org's key).
func WriterRefs(tb testing.TB, pool *pgxpool.Pool, org, agent, session string) (string, string) {
	tb.Helper()
	key := OrgKey(tb, pool, org)
	a, err := events.AgentRef(key, agent)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := events.SessionRef(key, session)
	if err != nil {
		tb.Fatal(err)
	}
	return a, s
}

// Ring is a KEK ring of a fresh random key, as LOOM_KEK would configure one.
func Ring(tb testing.TB) *kek.Ring {
	tb.Helper()
	setting, err := kek.Generate()
	if err != nil {
		tb.Fatal(err)
	}
	ring, err := kek.Parse(setting)
	if err != nil {
		tb.Fatal(err)
	}
	return ring
}
