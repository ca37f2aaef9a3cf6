package ch_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// A statement Loom runs leaves no row in the server's query log: the driver binds a
// statement's arguments into its text (a user id, a key, a search's words), and
// system.query_log keeps that text beyond any erasure. A connection without Loom's
// settings, on the same server, is logged: the log is on, so the check can fail.
func TestLoomStatementsLeaveNoQueryLog(t *testing.T) {
	ctx := context.Background()
	conn := open(t)
	raw, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	loomMark, rawMark := queryMark(t), queryMark(t)
	const probe = "SELECT count() FROM system.one WHERE toString(dummy) <> ?"
	var n uint64
	// With the statement's context and without it: the setting is the connection's.
	for _, c := range []context.Context{conn.Ctx(ctx), ctx} {
		if err := conn.QueryRow(c, probe, loomMark).Scan(&n); err != nil {
			t.Fatal(err)
		}
	}
	if err := raw.QueryRow(ctx, probe, rawMark).Scan(&n); err != nil {
		t.Fatal(err)
	}
	logged := func(mark string) uint64 {
		var c uint64
		if err := conn.QueryRow(ctx, `SELECT count() FROM system.query_log WHERE position(query, ?) > 0
			AND position(query, 'system.query_log') = 0`, mark).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	// The server queues a statement's log row as it finishes, which can be after the
	// client has its answer; a flush then misses it. The plain statement ran last, so
	// once its row is in the log, Loom's would be too.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := conn.Exec(ctx, "SYSTEM FLUSH LOGS"); err != nil {
			t.Fatal(err)
		}
		if logged(rawMark) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the query log holds no statement of a plain connection: it is off, and this test shows nothing")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if c := logged(loomMark); c > 0 {
		t.Errorf("the query log holds %d rows of Loom's statement with its argument in the clear", c)
	}
}

func queryMark(t *testing.T) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "m" + hex.EncodeToString(b)
}
