package bench

import (
	"context"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// RoundTrips counts the statements and batches a pool sends Postgres: each is one round
// trip (a batch is pipelined). A process under test given one (app.WithPGTracer) shows
// what a scenario's writes cost Postgres in round trips, a figure the machine's other
// load does not move. It counts the statements too, a batch's each: Postgres plans and
// runs each apart, pipelined or not.
type RoundTrips struct{ n, statements atomic.Int64 }

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

func (t *RoundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	t.n.Add(1)
	t.statements.Add(1)
	return ctx
}
func (t *RoundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (t *RoundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	t.n.Add(1)
	return ctx
}
func (t *RoundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	t.statements.Add(1)
}
func (t *RoundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
