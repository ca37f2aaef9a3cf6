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
// within one budget for all of them together, the capture included: past it, it
// returns a *BehindError, or a retryable POSTGRES_UNAVAILABLE when Postgres did not
// answer the capture or the first look at the watermarks.
func (b *Barrier) Wait(ctx context.Context, org string, namespaces []string) (Passed, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, b.budget)
	defer cancel()
	passed := Passed{Generations: map[string]int64{}}
	gens, err := generations.ReadMany(ctx, b.pool, org, namespaces)
	if err != nil {
		return passed, httperr.Store("capturing namespace generations", err)
	}
	passed.Generations = gens
	var marks map[string]int64
	for {
		wake := b.wake.C()
		read, err := watermarks.ReadMany(ctx, b.pool, b.projection, org, namespaces)
		switch {
		case err == nil:
			marks = read
		case marks == nil || ctx.Err() == nil:
			return passed, httperr.Store("reading projection watermarks", err)
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
			passed.WaitedMS = time.Since(start).Milliseconds()
			return passed, nil
		}
		timer := time.NewTimer(b.poll)
		select {
		case <-ctx.Done():
		case <-wake:
		case <-timer.C:
		}
		timer.Stop()
		if ctx.Err() != nil {
			return passed, &BehindError{Namespace: behind, Generation: gens[behind], Watermark: marks[behind], Budget: b.budget}
		}
	}
}
