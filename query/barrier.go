package query

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/internal/generations"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/pg"
	"github.com/loomplane/loom/internal/watermarks"
)

// Barrier makes a ClickHouse read wait until every revision committed before it began
// is projected: it captures each namespace's generation, then waits (woken by the
// projector's NOTIFY, with a bounded poll behind it) until the serving projection's
// watermark reaches it, or answers 503 PROJECTION_BEHIND once the budget is spent.
// Writes committed after the capture do not move it: it promises coverage through the
// capture, not a snapshot across the two stores.
type Barrier struct {
	pool       *pgxpool.Pool
	projection string
	budget     time.Duration
	wake       *pg.Listener
	poll       time.Duration
}

// NewBarrier returns a barrier over the projection's watermarks; wake must be a
// running listener on the loom_watermark channel.
func NewBarrier(pool *pgxpool.Pool, projection string, budget time.Duration, wake *pg.Listener) *Barrier {
	return &Barrier{pool: pool, projection: projection, budget: budget, wake: wake, poll: 250 * time.Millisecond}
}

// BehindError is a barrier whose budget ran out before the serving projection's
// watermark reached a namespace's captured generation: a retryable 503
// PROJECTION_BEHIND at the edge.
type BehindError struct {
	Namespace  string
	Generation int64 // the namespace's generation the read captured
	Watermark  int64 // how far the projection had come
	Budget     time.Duration
}

func (e *BehindError) Error() string {
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
	start := time.Now()
	passed := Passed{Generations: map[string]int64{}}
	gens, err := generations.ReadMany(ctx, b.pool, org, namespaces)
	if err != nil {
		return passed, httperr.Store("capturing namespace generations", err)
	}
	passed.Generations = gens
	deadline := start.Add(b.budget)
	for {
		wake := b.wake.C()
		marks, err := watermarks.ReadMany(ctx, b.pool, b.projection, org, namespaces)
		if err != nil {
			return passed, httperr.Store("reading projection watermarks", err)
		}
		behind := ""
		for ns, gen := range gens {
			if marks[ns] < gen {
				behind = ns
				break
			}
		}
		if behind == "" {
			passed.WaitedMS = time.Since(start).Milliseconds()
			return passed, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return passed, &BehindError{Namespace: behind, Generation: gens[behind], Watermark: marks[behind], Budget: b.budget}
		}
		timer := time.NewTimer(min(left, b.poll))
		select {
		case <-ctx.Done():
			timer.Stop()
			return passed, httperr.Store("waiting at the barrier", ctx.Err())
		case <-wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}
