package testenv

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/ch"
	"github.com/loomplane/loom/internal/generations"
	"github.com/loomplane/loom/internal/kek"
	"github.com/loomplane/loom/internal/watermarks"
)

// PG opens a pool on the test Postgres for the test's own checks; its sessions open
// the stored data keys as loomd's do (loom.opened_row, loom.unwrapped_key).
func (e *Env) PG(t testing.TB) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(e.Stack.Postgres.DSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams[kek.SessionParam] = e.KEKSession(t)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// KEKSession is the value loomd's sessions are given as kek.SessionParam.
func (e *Env) KEKSession(t testing.TB) string {
	t.Helper()
	ring, err := e.base.Keys.Ring()
	if err != nil {
		t.Fatal(err)
	}
	return ring.SessionValue()
}

// CH opens a connection on the test ClickHouse for the test's own checks.
func (e *Env) CH(t testing.TB) *ch.Conn {
	t.Helper()
	conn, err := ch.Open(context.Background(), ch.Config{Addr: []string{e.Stack.ClickHouse.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// Int reads one integer from Postgres.
func Int(t testing.TB, pool *pgxpool.Pool, q string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// Exec runs a statement on Postgres (a pool, a connection or a transaction) and
// fails the test if it errs.
func Exec(t testing.TB, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(context.Background(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// Eventually polls cond until it holds or limit passes. For waiting on background
// work (a relay draining), never for asserting how fast it is.
func Eventually(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Generation is a namespace's last committed seq.
func Generation(t testing.TB, pool *pgxpool.Pool, org, ns string) int64 {
	t.Helper()
	gen, err := generations.Read(context.Background(), pool, org, ns)
	if err != nil {
		t.Fatalf("read the generation of %s/%s: %v", org, ns, err)
	}
	return gen
}

// Watermark is the highest seq a projection has written for a namespace.
func Watermark(t testing.TB, pool *pgxpool.Pool, projection, org, ns string) int64 {
	t.Helper()
	wm, err := watermarks.Read(context.Background(), pool, projection, org, ns)
	if err != nil {
		t.Fatalf("read the watermark of %s/%s: %v", org, ns, err)
	}
	return wm
}

// WaitProjected waits until the projection has written everything committed to the
// namespace so far: a test that reads ClickHouse directly waits here, since a search
// waits for the process's search index, not for ClickHouse.
func WaitProjected(t testing.TB, pool *pgxpool.Pool, projection, org, ns string) {
	t.Helper()
	gen := Generation(t, pool, org, ns)
	Eventually(t, time.Minute, "projection "+projection+" to reach "+org+"/"+ns+"'s generation", func() bool {
		return Watermark(t, pool, projection, org, ns) >= gen
	})
}

// CheckProjection asserts that ClickHouse holds exactly what the Postgres journal says
// for a namespace, once each: every revision in memory_versions and audit_log, every
// head in memory and memory_embeddings, and the projection's watermark at the
// namespace's generation.
func CheckProjection(t testing.TB, pool *pgxpool.Pool, conn *ch.Conn, projection, org, ns string) {
	t.Helper()
	gen := Generation(t, pool, org, ns)
	if wm := Watermark(t, pool, projection, org, ns); wm != gen {
		t.Fatalf("watermark of %s is %d, generation %d", ns, wm, gen)
	}
	// The journal's content hash as its row holds it opened: the column's is keyed
	// (migration 101), the topic's and so ClickHouse's plain.
	revisions := PGStrings(t, pool, `SELECT seq || ':' || version || ':' || coalesce(loom.opened_row(row, sealed, org, namespace, seq)->>'content_sha256', '') FROM loom.memory_revisions
		WHERE org = $1 AND namespace = $2`, org, ns)
	// Every other generation's record (an erasure's, a redaction's, counted usage) is
	// kept in loom.generation_records: together they are every seq.
	kept := Int(t, pool, `SELECT count(*) FROM loom.generation_records WHERE org = $1 AND namespace = $2`, org, ns)
	if int64(len(revisions))+kept != gen {
		t.Fatalf("%d revisions and %d records without one for generation %d", len(revisions), kept, gen)
	}
	// The head's key as its row holds it opened: the column holds its reference (migration 171).
	heads := PGStrings(t, pool, `SELECT (loom.opened_row(row, sealed, org, namespace, seq)->>'memory_key') || ':' || version
		FROM loom.memory_current WHERE org = $1 AND namespace = $2`, org, ns)
	for _, c := range []struct {
		name, q string
		want    []string
	}{
		{"memory_versions", `SELECT concat(toString(seq), ':', toString(version), ':', content_sha256) FROM loom.memory_versions FINAL PREWHERE org = ? AND namespace = ?`, revisions},
		// A revision's own audit rows (a write's own row, a bulk write's batch, is an audit.* event).
		{"audit_log", `SELECT concat(toString(seq), ':', toString(version), ':', content_sha256) FROM loom.audit_log FINAL PREWHERE org = ? AND namespace = ? WHERE event_type NOT LIKE 'audit.%'`, revisions},
		{"memory", `SELECT concat(memory_key, ':', toString(version)) FROM loom.memory FINAL PREWHERE org = ? AND namespace = ?`, heads},
		{"memory_embeddings", `SELECT concat(memory_key, ':', toString(version)) FROM loom.memory_embeddings FINAL PREWHERE org = ? AND namespace = ?`, heads},
	} {
		got := CHStrings(t, conn, c.q, org, ns)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Fatalf("%s of %s does not match the journal:\n got  %v\n want %v", c.name, ns, got, c.want)
		}
	}
}

// PGStrings reads a one-column result of Postgres, sorted.
func PGStrings(t testing.TB, pool *pgxpool.Pool, q string, args ...any) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	return sortedStrings(t, rows)
}

// CHStrings reads a one-column result of ClickHouse, sorted.
func CHStrings(t testing.TB, conn *ch.Conn, q string, args ...any) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	return sortedStrings(t, rows)
}

// sortedStrings scans a one-column result of either store.
func sortedStrings(t testing.TB, rows interface {
	Next() bool
	Scan(...any) error
	Err() error
}) []string {
	t.Helper()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// ProjectionTables are the tables a projection writes.
var ProjectionTables = []string{"memory", "memory_versions", "memory_embeddings", "audit_log", "memory_lexical", "memory_chunks",
	"entities", "entity_triples", "entity_triple_rows", "entity_edges", "entity_edge_rows", "entity_sightings"}

// TableSums fingerprints what each projection table holds for the namespaces: its
// FINAL rows' count and the sum of a hash of every column of every row, so two calls
// agree exactly when the tables hold the same rows.
func TableSums(t testing.TB, conn *ch.Conn, org string, namespaces []string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	for _, table := range ProjectionTables {
		// 18.16's cityHash64 takes no UUID argument, and a NULL argument makes the
		// whole hash NULL, which sum skips: both are hashed as text.
		cols := CHStrings(t, conn, `SELECT multiIf(type = 'UUID', concat('toString(', name, ')'),
				startsWith(type, 'Nullable'), concat('ifNull(toString(', name, '), \'\')'), name)
			FROM system.columns WHERE database = 'loom' AND table = ?`, table)
		var count, sum uint64
		q := fmt.Sprintf(`SELECT count(), sum(cityHash64(%s)) FROM loom.%s FINAL WHERE org = ? AND has(?, namespace)`,
			strings.Join(cols, ", "), table)
		if err := conn.QueryRow(ctx, q, org, namespaces).Scan(&count, &sum); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		out[table] = fmt.Sprintf("%d rows, sum %x", count, sum)
	}
	return out
}

// Operator returns a client of url acting as a new operator token: health's details
// (?include=postgres,lag) are the operator's alone.
func (e *Env) Operator(t testing.TB, url string) *Client {
	t.Helper()
	secret, _, err := auth.NewStore(e.PG(t)).Create(context.Background(), auth.NewToken{Role: auth.RoleOperator, Name: "test operator"})
	if err != nil {
		t.Fatalf("create an operator token: %v", err)
	}
	return NewClient(url, secret)
}
