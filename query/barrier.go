package query

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/generations"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/searchindex"
	"github.com/loomplane/loom/internal/watermarks"
)

// Barrier makes a read wait until every revision committed before it began is in the
// read model it reads: it captures each namespace's generation, then waits until the
// model has applied it, or answers 503 PROJECTION_BEHIND once the budget is spent. A
// ClickHouse read waits (woken by the projector's NOTIFY, with a bounded poll behind it)
// for the serving projection's watermark; a read of the process's search index waits in
// process for the index's position. Writes committed after the capture do not move it:
// it promises coverage through the capture, not a snapshot across the two stores.
type Barrier struct {
	pool       *pgxpool.Pool
	projection string
	budget     time.Duration
	wake       *pg.Listener
	poll       time.Duration
	wantedAt   atomic.Int64 // unix ns of this barrier's last call on the projectors
}

// NewBarrier returns a barrier over the projection's watermarks; wake must be a
// running listener on the loom_watermark channel.
func NewBarrier(pool *pgxpool.Pool, projection string, budget time.Duration, wake *pg.Listener) *Barrier {
	return &Barrier{pool: pool, projection: projection, budget: budget, wake: wake, poll: 250 * time.Millisecond}
}

// BehindError is a barrier whose budget ran out before the serving projection's
// watermark (or the search index's position) reached a namespace's captured
// generation: a retryable 503 PROJECTION_BEHIND at the edge.
type BehindError struct {
	Namespace  string
	Generation int64 // the namespace's generation the read captured
	Watermark  int64 // how far the projection (or the index) had come
	Budget     time.Duration
	Index      bool // the read waited for the process's search index
}

func (e *BehindError) Error() string {
	if e.Index {
		return fmt.Sprintf("the search index of this process has not caught up with namespace %s within %s", e.Namespace, e.Budget)
	}
	return fmt.Sprintf("ClickHouse has not caught up with namespace %s within %s", e.Namespace, e.Budget)
}

// Passed says what a barrier waited for.
type Passed struct {
	Generations map[string]int64 `json:"generations"`
	WaitedMS    int64            `json:"waited_ms"`
}

// Wait captures the namespaces' generations and waits for the watermark to reach them,
// within one budget for all of them together; past it, it returns a *BehindError.
func (b *Barrier) Wait(ctx context.Context, org string, namespaces []string) (Passed, error) {
	return b.WaitIndexed(ctx, org, namespaces, nil, nil)
}

// Capture is a barrier's capture of the namespaces' generations, queued on a batch of
// the read's own statements so it costs no round trip of its own. The barrier's budget
// runs from the moment it is queued, and covers the capture.
type Capture struct {
	start       time.Time
	deadline    time.Time
	generations map[string]int64
}

// QueueCapture starts a barrier and queues its capture on batch; the caller sends the
// batch within Deadline (a Postgres that does not answer it is a retryable 503 within
// the budget, not a wait as long as it is frozen) and then waits with WaitCaptured.
func (b *Barrier) QueueCapture(batch *pgx.Batch, org string, namespaces []string) *Capture {
	start := time.Now()
	c := &Capture{start: start, deadline: start.Add(b.budget), generations: make(map[string]int64, len(namespaces))}
	generations.QueueReadMany(batch, org, namespaces, c.generations)
	return c
}

// Deadline is when the capture's budget ends.
func (c *Capture) Deadline() time.Time { return c.deadline }

// WaitIndexed is Wait for a read that reads the namespaces indexed names from the
// process's search index x: those wait in process until the index has applied their
// generation, the others for the watermark, all within the one budget.
func (b *Barrier) WaitIndexed(ctx context.Context, org string, namespaces []string, x *searchindex.Index, indexed func(ns string) bool) (Passed, error) {
	batch := &pgx.Batch{}
	c := b.QueueCapture(batch, org, namespaces)
	cctx, ccancel := context.WithDeadline(ctx, c.deadline)
	err := b.pool.SendBatch(cctx, batch).Close()
	ccancel()
	if err != nil {
		return Passed{Generations: map[string]int64{}}, httperr.Store("capturing namespace generations", err)
	}
	return b.WaitCaptured(ctx, org, c, x, indexed)
}

// WaitCaptured waits for a capture sent with its batch: the namespaces indexed names
// (when x is set) in process for the index, the others for the watermark.
func (b *Barrier) WaitCaptured(ctx context.Context, org string, c *Capture, x *searchindex.Index, indexed func(ns string) bool) (Passed, error) {
	passed := Passed{Generations: c.generations}
	projected := map[string]int64{}
	for ns, gen := range c.generations {
		if x == nil || !indexed(ns) {
			projected[ns] = gen
			continue
		}
		if err := b.waitIndex(ctx, x, searchindex.Space{Org: org, Namespace: ns}, gen, c.deadline); err != nil {
			return passed, err
		}
	}
	if err := b.WaitProjected(ctx, org, projected, c.deadline); err != nil {
		return passed, err
	}
	passed.WaitedMS = time.Since(c.start).Milliseconds()
	return passed, nil
}

// waitIndex waits until the index's position of sp reaches gen, or deadline passes.
func (b *Barrier) waitIndex(ctx context.Context, x *searchindex.Index, sp searchindex.Space, gen int64, deadline time.Time) error {
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if err := x.WaitFor(wctx, sp, gen); err != nil {
		if ctx.Err() != nil {
			return httperr.Store("waiting at the barrier", ctx.Err())
		}
		return &BehindError{Namespace: sp.Namespace, Generation: gen, Watermark: x.Position(sp), Budget: b.budget, Index: true}
	}
	return nil
}

// WaitProjected waits until the serving projection's watermark reaches each
// namespace's generation in gens, or deadline passes.
func (b *Barrier) WaitProjected(ctx context.Context, org string, gens map[string]int64, deadline time.Time) error {
	if len(gens) == 0 {
		return nil
	}
	namespaces := make([]string, 0, len(gens))
	for ns := range gens {
		namespaces = append(namespaces, ns)
	}
	var marks map[string]int64
	for {
		wake := b.wake.C()
		rctx, rcancel := context.WithDeadline(ctx, deadline)
		read, err := watermarks.ReadMany(rctx, b.pool, b.projection, org, namespaces)
		rcancel()
		switch {
		case err == nil:
			marks = read
		case marks == nil || time.Now().Before(deadline):
			return httperr.Store("reading projection watermarks", err)
		}
		// A look cut by the budget leaves the last one standing.
		behind := ""
		for ns, gen := range gens {
			if marks[ns] < gen {
				behind = ns
				break
			}
		}
		if behind == "" {
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return &BehindError{Namespace: behind, Generation: gens[behind], Watermark: marks[behind], Budget: b.budget}
		}
		b.want(ctx, deadline)
		timer := time.NewTimer(min(left, b.poll))
		select {
		case <-ctx.Done():
			timer.Stop()
			return httperr.Store("waiting at the barrier", ctx.Err())
		case <-wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// wantEvery bounds how often one barrier calls the projectors: reads that wait
// together need one call, not one each.
const wantEvery = 20 * time.Millisecond

// want calls the projection's projectors to write their next batch now (a projector
// stretches its pace under steady writes, projector/pace.go). Best effort: a lost call
// costs the wait the pace holds, within the budget.
func (b *Barrier) want(ctx context.Context, deadline time.Time) {
	now := time.Now().UnixNano()
	last := b.wantedAt.Load()
	if now-last < int64(wantEvery) || !b.wantedAt.CompareAndSwap(last, now) {
		return
	}
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	_ = watermarks.Want(wctx, b.pool, b.projection)
}

// Budget is how long a read waits at the barrier.
func (b *Barrier) Budget() time.Duration { return b.budget }
