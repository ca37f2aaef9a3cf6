package bench

import (
	"context"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// RoundTrips counts the statements and batches a pool sends Postgres: each is one round
// trip (a batch is pipelined). A process under test given one (app.WithPGTracer) shows
// what a scenario's writes cost Postgres in round trips, a figure the machine's other
// load does not move.
type RoundTrips struct{ n atomic.Int64 }

// Count is the round trips counted so far; a nil counter counts none.
func (t *RoundTrips) Count() int64 {
	if t == nil {
		return 0
	}
	return t.n.Load()
}

func (t *RoundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	t.n.Add(1)
	return ctx
}
func (t *RoundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (t *RoundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	t.n.Add(1)
	return ctx
}
func (t *RoundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (t *RoundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}
