package ch_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// A statement whose bound arguments run past the server's default max_query_size
// (256 KiB), as an erasure's mutation naming every seq of a user's graph records
// does, is parsed on Loom's connections; a plain connection to the same server
// refuses it, so the check can fail.
func TestAStatementNamingManyValuesIsAccepted(t *testing.T) {
	ctx := context.Background()
	conn := open(t)
	seqs := make([]uint64, 20000) // ~400 kB bound
	for i := range seqs {
		seqs[i] = 1796560533858833634 + uint64(i)
	}
	const q = "SELECT length(?)"
	var n uint64
	if err := conn.QueryRow(conn.Ctx(ctx), q, seqs).Scan(&n); err != nil {
		t.Fatalf("a statement naming %d seqs: %v", len(seqs), err)
	}
	if n != uint64(len(seqs)) {
		t.Fatalf("the statement counted %d seqs, want %d", n, len(seqs))
	}
	raw, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	if err := raw.QueryRow(ctx, q, seqs).Scan(&n); err == nil || !strings.Contains(err.Error(), "Max query size") {
		t.Fatalf("a plain connection took the statement (err %v): the server's limit is not the default, and this test shows nothing", err)
	}
}
