package pg_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/devstack"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/pgtest"
	pgmigrations "github.com/loomplane/loom/schemas/postgres"
)

var postgres *devstack.Postgres

func TestMain(m *testing.M) { os.Exit(devstack.RunWithPostgres(m.Run, &postgres)) }

func freshDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	return pgtest.Pool(t, postgres)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestMigrateAppliesOnceAndRecordsLedger(t *testing.T) {
	ctx := context.Background()
	pool := freshDB(t)
	applied, err := pg.Migrate(ctx, pool, pgmigrations.Files, quiet)
	if err != nil {
		t.Fatalf("migrate: %v", err)
	}
	if len(applied) == 0 || applied[0] != "001_init.sql" {
		t.Fatalf("applied %v, want 001_init.sql first", applied)
	}
	again, err := pg.Migrate(ctx, pool, pgmigrations.Files, quiet)
	if err != nil || len(again) != 0 {
		t.Fatalf("second run applied %v, err %v; want nothing", again, err)
	}
	for _, table := range []string{"authority", "scope_generations", "memory_current", "memory_revisions",
		"revision_keys", "outbox", "idempotency", "projection_watermarks", "api_tokens", "pg_migrations"} {
		var exists bool
		if err := pool.QueryRow(ctx, "SELECT to_regclass('loom.'||$1) IS NOT NULL", table).Scan(&exists); err != nil || !exists {
			t.Errorf("table loom.%s missing after migrate (err %v)", table, err)
		}
	}
	pending, err := pg.Pending(ctx, pool, pgmigrations.Files)
	if err != nil || len(pending) != 0 {
		t.Fatalf("pending after migrate: %v, %v", pending, err)
	}
}

func TestMigrateRefusesAChangedAppliedFile(t *testing.T) {
	ctx := context.Background()
	pool := freshDB(t)
	v1 := fstest.MapFS{"001_a.sql": {Data: []byte("CREATE SCHEMA IF NOT EXISTS loom; CREATE TABLE loom.a (x int);")}}
	if _, err := pg.Migrate(ctx, pool, v1, quiet); err != nil {
		t.Fatal(err)
	}
	edited := fstest.MapFS{"001_a.sql": {Data: []byte("CREATE SCHEMA IF NOT EXISTS loom; CREATE TABLE loom.a (x bigint);")}}
	_, err := pg.Migrate(ctx, pool, edited, quiet)
	if err == nil || !strings.Contains(err.Error(), "changed after it was applied") {
		t.Fatalf("edited applied file: err %v, want a refusal", err)
	}
	if _, err := pg.Pending(ctx, pool, edited); err == nil {
		t.Fatal("readiness must refuse an edited applied file too")
	}
}

func TestMigrateRefusesAMissingFileAndServesNewerOnes(t *testing.T) {
	ctx := context.Background()
	pool := freshDB(t)
	v2 := fstest.MapFS{
		"001_a.sql": {Data: []byte("CREATE SCHEMA IF NOT EXISTS loom; CREATE TABLE loom.a (x int);")},
		"002_b.sql": {Data: []byte("CREATE TABLE loom.b (x int);")},
	}
	if _, err := pg.Migrate(ctx, pool, v2, quiet); err != nil {
		t.Fatal(err)
	}
	// An older build (N-1) serves on the newer schema.
	older := fstest.MapFS{"001_a.sql": v2["001_a.sql"]}
	if _, err := pg.Migrate(ctx, pool, older, quiet); err != nil {
		t.Fatalf("older build on a newer schema: %v", err)
	}
	// A build that lacks a file below its own last one was built wrong.
	gap := fstest.MapFS{"001_a.sql": v2["001_a.sql"], "003_c.sql": {Data: []byte("CREATE TABLE loom.c (x int);")}}
	if _, err := pg.Migrate(ctx, pool, gap, quiet); err == nil {
		t.Fatal("a ledger row for a file below the build's last number must refuse the boot")
	}
}

func TestMigrateRollsBackAFailedFile(t *testing.T) {
	ctx := context.Background()
	pool := freshDB(t)
	bad := fstest.MapFS{"001_a.sql": {Data: []byte("CREATE SCHEMA IF NOT EXISTS loom; CREATE TABLE loom.a (x int); CREATE TABLE loom.a (x int);")}}
	if _, err := pg.Migrate(ctx, pool, bad, quiet); err == nil {
		t.Fatal("a failing file must fail the migration")
	}
	var exists bool
	pool.QueryRow(ctx, "SELECT to_regclass('loom.a') IS NOT NULL").Scan(&exists)
	if exists {
		t.Fatal("a failed file left part of its DDL behind")
	}
	var n int
	pool.QueryRow(ctx, "SELECT count(*) FROM loom.pg_migrations").Scan(&n)
	if n != 0 {
		t.Fatalf("a failed file was recorded in the ledger (%d rows)", n)
	}
}

// Two processes booting at once: the advisory lock lets one apply and the other find
// nothing left to do.
func TestConcurrentMigratorsApplyEachFileOnce(t *testing.T) {
	ctx := context.Background()
	pool := freshDB(t)
	type result struct {
		applied []string
		err     error
	}
	results := make(chan result, 2)
	for i := 0; i < 2; i++ {
		go func() {
			a, err := pg.Migrate(ctx, pool, pgmigrations.Files, quiet)
			results <- result{a, err}
		}()
	}
	total := 0
	for i := 0; i < 2; i++ {
		r := <-results
		if r.err != nil {
			t.Fatalf("concurrent migrate: %v", r.err)
		}
		total += len(r.applied)
	}
	files, _ := pgmigrations.Files.ReadDir(".")
	sqlFiles := 0
	for _, f := range files {
		if strings.HasSuffix(f.Name(), ".sql") {
			sqlFiles++
		}
	}
	if total != sqlFiles {
		t.Fatalf("two migrators applied %d files between them, want %d", total, sqlFiles)
	}
}
