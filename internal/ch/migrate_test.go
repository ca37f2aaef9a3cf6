package ch_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/devstack"
	chmigrations "github.com/loomplane/loom/schemas/clickhouse"
)

var addr string

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	s, err := devstack.Start(ctx, devstack.Options{SkipPostgres: true, SkipKafka: true})
	cancel()
	if err != nil {
		os.Stderr.WriteString("start ClickHouse: " + err.Error() + "\n")
		os.Exit(1)
	}
	addr = s.ClickHouse.Addr()
	code := m.Run()
	s.Stop()
	os.Exit(code)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// localLock stands in for the Postgres advisory lock loomd passes.
func localLock() ch.Locker {
	var mu sync.Mutex
	return func(context.Context) (func(), error) { mu.Lock(); return mu.Unlock, nil }
}

func open(t *testing.T) *ch.Conn {
	t.Helper()
	conn, err := ch.Open(context.Background(), ch.Config{Addr: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func reset(t *testing.T, conn *ch.Conn) {
	t.Helper()
	if err := conn.Exec(context.Background(), "DROP DATABASE IF EXISTS loom"); err != nil {
		t.Fatal(err)
	}
}

func TestProbeReadsTheServer(t *testing.T) {
	conn := open(t)
	if conn.Caps.Version == "" || conn.Caps.Major == 0 {
		t.Fatalf("probe found no version: %+v", conn.Caps)
	}
	// Debian 12's 18.16 (the test server) has neither; the probe must not claim them.
	if conn.Caps.Major == 18 && (conn.Caps.AsyncInsert || conn.Caps.CosineDistance) {
		t.Fatalf("probe claims capabilities 18.16 lacks: %+v", conn.Caps)
	}
	if !conn.Caps.AtLeast(21, 11) && conn.Caps.AsyncInsert {
		t.Fatalf("server %s cannot know async_insert", conn.Caps.Version)
	}
}

func TestMigrateCreatesTablesOnceAndRefusesEdits(t *testing.T) {
	ctx := context.Background()
	conn := open(t)
	reset(t, conn)
	res, err := ch.Migrate(ctx, conn, chmigrations.Files, localLock(), quiet)
	if err != nil {
		t.Fatalf("migrate: %v", err)
	}
	if len(res.Applied) == 0 {
		t.Fatal("nothing applied on an empty server")
	}
	for _, table := range []string{"memory", "memory_versions", "memory_embeddings", "audit_log", "ch_migrations"} {
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = 'loom' AND name = ?", table).Scan(&n); err != nil || n != 1 {
			t.Errorf("table loom.%s missing (err %v)", table, err)
		}
	}
	again, err := ch.Migrate(ctx, conn, chmigrations.Files, localLock(), quiet)
	if err != nil || len(again.Applied) != 0 {
		t.Fatalf("second run applied %v, err %v", again.Applied, err)
	}
	pending, err := ch.Pending(ctx, conn, chmigrations.Files)
	if err != nil || len(pending) != 0 {
		t.Fatalf("pending after migrate: %v, %v", pending, err)
	}

	edited := fstest.MapFS{}
	files, _ := chmigrations.Files.ReadDir(".")
	for _, f := range files {
		b, _ := chmigrations.Files.ReadFile(f.Name())
		edited[f.Name()] = &fstest.MapFile{Data: append(b, []byte("\n-- edited\n")...)}
	}
	if _, err := ch.Migrate(ctx, conn, edited, localLock(), quiet); err == nil {
		t.Fatal("an edited applied file must refuse the boot")
	}
}

func TestRequiresSkipsOnAnOlderServerAndRecordsIt(t *testing.T) {
	ctx := context.Background()
	conn := open(t)
	reset(t, conn)
	files := fstest.MapFS{
		"001_base.sql":   {Data: []byte("CREATE TABLE IF NOT EXISTS loom.base (x String) ENGINE = MergeTree ORDER BY x;\n")},
		"002_future.sql": {Data: []byte("-- requires: clickhouse >= 999.1\nCREATE TABLE loom.future (x LowCardinality(String)) ENGINE = MergeTree ORDER BY x;\n")},
	}
	res, err := ch.Migrate(ctx, conn, files, localLock(), quiet)
	if err != nil {
		t.Fatalf("migrate: %v", err)
	}
	if len(res.Applied) != 1 || len(res.Skipped) != 1 || res.Skipped[0] != "002_future.sql" {
		t.Fatalf("applied %v skipped %v; want 001 applied and 002 skipped", res.Applied, res.Skipped)
	}
	var n uint64
	conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = 'loom' AND name = 'future'").Scan(&n)
	if n != 0 {
		t.Fatal("a skipped file created its table")
	}
	// A skipped file is recorded, so readiness does not wait for it.
	pending, err := ch.Pending(ctx, conn, files)
	if err != nil || len(pending) != 0 {
		t.Fatalf("pending: %v, %v; a skipped file is not pending", pending, err)
	}
}

func TestStatementsSplitsOnLineEndSemicolons(t *testing.T) {
	got := ch.Statements("-- a comment\nCREATE TABLE a (x String)\nENGINE = Memory;\n\nSELECT 'a;b';\nSELECT 2")
	want := []string{"CREATE TABLE a (x String)\nENGINE = Memory", "SELECT 'a;b'", "SELECT 2"}
	if len(got) != len(want) {
		t.Fatalf("got %q", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("statement %d: got %q want %q", i, got[i], want[i])
		}
	}
}

// Cluster mode rewrites the single-server migrations; the rewrite is checked on the
// real schema and on each statement shape a migration uses.
func TestClusterDDLReplicatesOnCluster(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"CREATE DATABASE IF NOT EXISTS loom", "CREATE DATABASE IF NOT EXISTS loom ON CLUSTER 'main'"},
		{"CREATE TABLE IF NOT EXISTS loom.memory (\n    org String\n) ENGINE = ReplacingMergeTree(version)\nORDER BY (org)",
			"CREATE TABLE IF NOT EXISTS loom.memory ON CLUSTER 'main' (\n    org String\n) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/loom/memory', '{replica}', version)\nORDER BY (org)"},
		{"CREATE TABLE loom.audit_log (x String) ENGINE = ReplacingMergeTree() ORDER BY x",
			"CREATE TABLE loom.audit_log ON CLUSTER 'main' (x String) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/loom/audit_log', '{replica}') ORDER BY x"},
		{"CREATE TABLE loom.base (x String) ENGINE = MergeTree ORDER BY x",
			"CREATE TABLE loom.base ON CLUSTER 'main' (x String) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/loom/base', '{replica}') ORDER BY x"},
		{"ALTER TABLE loom.memory ADD INDEX v value TYPE bloom_filter GRANULARITY 4",
			"ALTER TABLE loom.memory ON CLUSTER 'main' ADD INDEX v value TYPE bloom_filter GRANULARITY 4"},
		{"DROP TABLE IF EXISTS loom.old", "DROP TABLE IF EXISTS loom.old ON CLUSTER 'main'"},
		// Already written for a cluster, or not DDL: untouched.
		{"CREATE TABLE loom.r ON CLUSTER x (x String) ENGINE = ReplicatedMergeTree('/p', '{replica}') ORDER BY x",
			"CREATE TABLE loom.r ON CLUSTER x (x String) ENGINE = ReplicatedMergeTree('/p', '{replica}') ORDER BY x"},
		{"SELECT 1", "SELECT 1"},
	} {
		if got := ch.ClusterDDL(c.in, "main"); got != c.want {
			t.Errorf("ClusterDDL(%q)\n got  %q\n want %q", c.in, got, c.want)
		}
		if got := ch.ClusterDDL(c.in, ""); got != c.in {
			t.Errorf("without a cluster the statement must not change: %q", got)
		}
	}
	// Every statement of every shipped migration that creates a table comes out replicated.
	files, _ := chmigrations.Files.ReadDir(".")
	for _, f := range files {
		b, _ := chmigrations.Files.ReadFile(f.Name())
		for _, stmt := range ch.Statements(string(b)) {
			out := ch.ClusterDDL(stmt, "{cluster}")
			if strings.Contains(stmt, "CREATE TABLE") && (!strings.Contains(out, "ON CLUSTER '{cluster}'") || !strings.Contains(out, "ENGINE = Replicated")) {
				t.Errorf("%s: not rewritten for a cluster:\n%s", f.Name(), out)
			}
		}
	}
}
