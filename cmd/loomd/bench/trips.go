package bench

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// RoundTrips counts the statements and batches a pool sends Postgres: each is one round
// trip (a batch is pipelined). A process under test given one (app.WithPGTracer) shows
// what a scenario's writes cost Postgres in round trips, a figure the machine's other
// load does not move. It counts the statements too, a batch's each: Postgres plans and
// runs each apart, pipelined or not.
type RoundTrips struct {
	n, statements atomic.Int64
	// census, when on (CountStatements), counts the statements by their text's start,
	// so a scenario can say which role's statements a write set off.
	census   sync.Map // string → *atomic.Int64
	counting atomic.Bool
}

// CountStatements turns the census of statements by text on.
func (t *RoundTrips) CountStatements() { t.counting.Store(true) }

// censusKey is a statement's text, its whitespace collapsed, cut to 90 characters: as
// much as tells one statement of a role from another.
func censusKey(sql string) string {
	s := strings.Join(strings.Fields(sql), " ")
	if len(s) > 90 {
		s = s[:90]
	}
	return s
}

func (t *RoundTrips) census1(sql string) {
	if t == nil || !t.counting.Load() {
		return
	}
	k := censusKey(sql)
	v, ok := t.census.Load(k)
	if !ok {
		v, _ = t.census.LoadOrStore(k, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(1)
}

// Census is the statements counted so far by text (nil: the census is off).
func (t *RoundTrips) Census() map[string]int64 {
	if t == nil || !t.counting.Load() {
		return nil
	}
	out := map[string]int64{}
	t.census.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

// writeCensus writes the statements counted between two censuses, per write of n,
// most first.
func writeCensus(w io.Writer, label string, before, after map[string]int64, n int) {
	if after == nil || n == 0 {
		return
	}
	type row struct {
		k string
		d int64
	}
	var rows []row
	var total int64
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			rows = append(rows, row{k, d})
			total += d
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].d > rows[j].d })
	fmt.Fprintf(w, "bench: statements of %s: %.2f a call over %d calls\n", label, float64(total)/float64(n), n)
	for _, r := range rows {
		fmt.Fprintf(w, "bench:   %6.3f  %s\n", float64(r.d)/float64(n), r.k)
	}
}

// Count is the round trips counted so far; a nil counter counts none.
func (t *RoundTrips) Count() int64 {
	if t == nil {
		return 0
	}
	return t.n.Load()
}

// Statements is the statements counted so far, a batch's each; a nil counter counts none.
func (t *RoundTrips) Statements() int64 {
	if t == nil {
		return 0
	}
	return t.statements.Load()
}

func (t *RoundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	t.n.Add(1)
	t.statements.Add(1)
	t.census1(d.SQL)
	return ctx
}
func (t *RoundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (t *RoundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	t.n.Add(1)
	return ctx
}
func (t *RoundTrips) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	t.statements.Add(1)
	t.census1(d.SQL)
}
func (t *RoundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
