package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/loomplane/loom/internal/pgtest"
)

// The relay's read finds each pending row's revision by the journal's primary key even
// under a plan made while the journal was empty and unanalysed and kept as it grew to
// two thousand revisions (the relay's prepared statement keeps its generic plan until an
// ANALYZE): a plan that scans the org's journal for each row makes every publish slower
// with every revision stored. A row whose revision is gone reads none, not an earlier one.
func TestThePendingReadLooksUpEachRevisionByItsKey(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.Migrated(t, postgres, "acme")
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("SET plan_cache_mode = force_generic_plan")
	exec("PREPARE pending(int, text[]) AS " + readPendingSQL)
	for range 6 {
		exec("EXECUTE pending(100, '{}')")
	}
	for from := int64(1); from <= 2000; from += 500 {
		b := &pgx.Batch{}
		for seq := from; seq < from+500; seq++ {
			queueRevision(t, b, "acme", "grows", fmt.Sprintf("user%d", seq%7), seq, true)
		}
		if err := conn.SendBatch(ctx, b).Close(); err != nil {
			t.Fatal(err)
		}
		exec("DELETE FROM loom.outbox WHERE seq < $1", from+495) // published: the newest five stay pending
	}
	var raw []byte
	if err := conn.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE pending(100, '{}')").Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var plan []struct{ Plan node }
	if err := json.Unmarshal(raw, &plan); err != nil {
		t.Fatal(err)
	}
	if found, read := int(plan[0].Plan.ActualRows), plan[0].Plan.revisionsRead(); found != 5 || read > 2*found {
		t.Errorf("read %d pending rows reading %d of the journal's 2,000 revisions; want 5 reading at most two a row:\n%s", found, read, raw)
	}

	// A revision erased since its row was queued: the row reads no revision.
	exec("DELETE FROM loom.memory_revisions WHERE org = 'acme' AND namespace = 'grows' AND seq = 2000")
	pending, err := ReadPending(ctx, pool, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pending {
		if named := p.Journal.UserRef != ""; named != (p.Seq != 2000) {
			t.Errorf("row %d reads a revision: %v (user reference %q)", p.Seq, named, p.Journal.UserRef)
		}
	}
}

// node is a node of EXPLAIN's JSON plan.
type node struct {
	Relation   string  `json:"Relation Name"`
	ActualRows float64 `json:"Actual Rows"`
	Loops      float64 `json:"Actual Loops"`
	Removed    float64 `json:"Rows Removed by Filter"`
	Plans      []node  `json:"Plans"`
}

// revisionsRead is how many memory_revisions rows the plan read: found and filtered
// out, over every loop.
func (n node) revisionsRead() int {
	read := 0
	if n.Relation == "memory_revisions" {
		read += int((n.ActualRows + n.Removed) * n.Loops)
	}
	for _, c := range n.Plans {
		read += c.revisionsRead()
	}
	return read
}
