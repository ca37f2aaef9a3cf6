// Package groupcommit runs the calls that arrive for one key while another is in
// flight as one batch: the first caller of a key runs its call alone; callers that
// arrive meanwhile wait, and when it ends the first of them runs all of them together.
// A transaction that serialises on a per-key lock (a namespace's generation row) then
// takes the lock once for many callers instead of once each.
package groupcommit

import (
	"context"
	"sync"
	"time"
)

// RunFunc runs a batch, in arrival order, and returns each item's error.
type RunFunc[T any] func(ctx context.Context, items []T) []error

// Group batches the calls of each key. Its zero value is not usable: see New.
type Group[T any] struct {
	run RunFunc[T]
	// fits reports whether item may join a batch that holds batch; the first item of
	// a batch always runs.
	fits func(batch []T, item T) bool
	max  int

	mu     sync.Mutex
	queues map[string]*queue[T]
}

type queue[T any] struct {
	running bool
	waiting []*ticket[T]
}

type ticket[T any] struct {
	ctx  context.Context
	item T
	// done carries the item's outcome, or lead: the ticket's caller runs the next batch.
	done chan outcome
}

type outcome struct {
	err  error
	lead bool
}

// New returns a group that runs batches of at most max items with run; fits, when not
// nil, may keep an item out of a batch (it goes in the next one).
func New[T any](max int, fits func(batch []T, item T) bool, run RunFunc[T]) *Group[T] {
	if max < 1 {
		max = 1
	}
	return &Group[T]{run: run, fits: fits, max: max, queues: map[string]*queue[T]{}}
}

// Do runs item, alone or in a batch with other items of key, and returns its error.
// A caller whose ctx ends while it waits for its batch to start returns ctx's error
// and its item never runs; once its batch has started, it waits for the outcome.
func (g *Group[T]) Do(ctx context.Context, key string, item T) error {
	t := &ticket[T]{ctx: ctx, item: item, done: make(chan outcome, 1)}
	g.mu.Lock()
	q := g.queues[key]
	if q == nil {
		q = &queue[T]{}
		g.queues[key] = q
	}
	if !q.running {
		q.running = true
		g.mu.Unlock()
		return g.lead(key, t)
	}
	q.waiting = append(q.waiting, t)
	g.mu.Unlock()
	select {
	case o := <-t.done:
		return g.settle(key, t, o)
	case <-ctx.Done():
	}
	if g.withdraw(key, t) {
		return ctx.Err()
	}
	return g.settle(key, t, <-t.done)
}

func (g *Group[T]) settle(key string, t *ticket[T], o outcome) error {
	if o.lead {
		return g.lead(key, t)
	}
	return o.err
}

// withdraw takes a ticket whose batch has not started out of its queue.
func (g *Group[T]) withdraw(key string, t *ticket[T]) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	q := g.queues[key]
	for i, w := range q.waiting {
		if w == t {
			q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
			return true
		}
	}
	return false
}

// lead runs a batch headed by t, hands the next batch to the first caller still
// waiting, and returns t's outcome.
func (g *Group[T]) lead(key string, t *ticket[T]) error {
	batch := g.take(key, t)
	items := make([]T, len(batch))
	for i, b := range batch {
		items[i] = b.item
	}
	ctx, cancel := batchContext(batch)
	errs := g.run(ctx, items)
	cancel()
	for i, b := range batch[1:] {
		b.done <- outcome{err: errs[i+1]}
	}
	g.handOff(key)
	return errs[0]
}

// take makes the batch t heads: t and the waiting tickets that fit, in arrival order.
func (g *Group[T]) take(key string, t *ticket[T]) []*ticket[T] {
	g.mu.Lock()
	defer g.mu.Unlock()
	q := g.queues[key]
	batch := []*ticket[T]{t}
	items := []T{t.item}
	kept := q.waiting[:0]
	for _, w := range q.waiting {
		if len(batch) < g.max && (g.fits == nil || g.fits(items, w.item)) {
			batch, items = append(batch, w), append(items, w.item)
			continue
		}
		kept = append(kept, w)
	}
	clear(q.waiting[len(kept):])
	q.waiting = kept
	return batch
}

func (g *Group[T]) handOff(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	q := g.queues[key]
	if len(q.waiting) == 0 {
		delete(g.queues, key)
		return
	}
	next := q.waiting[0]
	q.waiting = q.waiting[1:]
	next.done <- outcome{lead: true}
}

// batchContext is what a batch runs under: no caller's cancellation ends it (the
// others' items are in it), and it lasts as long as its longest-lived caller's
// deadline; without a deadline when any caller has none.
func batchContext[T any](batch []*ticket[T]) (context.Context, context.CancelFunc) {
	base := context.WithoutCancel(batch[0].ctx)
	var latest time.Time
	for _, t := range batch {
		d, ok := t.ctx.Deadline()
		if !ok {
			return base, func() {}
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(base, latest)
}
