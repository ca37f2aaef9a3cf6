package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/loomplane/loom/client"
)

// historyGateRatio is the target for memory.history (issue 28): p50 at most 5× a point
// read's in the same run.
const historyGateRatio = 5

// historyVersions is how many versions each key of the history scenario holds.
const historyVersions = 3

// historyWritesPerSecond is the light write load both reads run beside: revisions of
// the namespace's keys, so its generation keeps moving past what the projection holds,
// as under real use. A read that waited for the projection waited behind these.
const historyWritesPerSecond = 20

// history measures memory.history of random keys among GetRows memories of
// historyVersions versions each, beside memory.get of the same keys in the same run,
// both while a light writer revises the namespace.
func (r *runner) history(ctx context.Context) (*ScenarioResult, error) {
	res := &ScenarioResult{
		Title:    "memory.history latency",
		Baseline: "memory.get (a point read) of the same keys, at the same concurrency, in the same run",
		Notes: []string{fmt.Sprintf("each key holds %d versions; a writer revises random keys of the namespace at %d/s during both "+
			"reads, so the namespace's generation keeps moving past what the projection holds", historyVersions, historyWritesPerSecond)},
	}
	ns := r.namespace("history")
	if err := r.appendOnly(ctx, ns); err != nil {
		return nil, err
	}
	if err := r.load(ctx, ns, r.opts.GetRows); err != nil {
		return nil, err
	}
	batch := min(r.opts.BulkEntries, 1000)
	for v := 1; v < historyVersions; v++ {
		r.progress("  revising the %d memories of %s (version %d)", r.opts.GetRows, ns, v+1)
		for from := 0; from < r.opts.GetRows; from += batch {
			entries := r.bulkEntries(from, min(batch, r.opts.GetRows-from), loadKey)
			if err := r.retrying(ctx, func() error {
				_, err := r.api.BulkSet(ctx, ns, client.BulkSetRequest{Entries: entries},
					client.IdempotencyKey(fmt.Sprintf("%s-v%d-%d", ns, v, from)))
				return err
			}); err != nil {
				return nil, fmt.Errorf("revise %s: %w", ns, err)
			}
			if err := r.waitProjected(ctx, ns); err != nil {
				return nil, err
			}
		}
	}
	// One history checked in full first: the run must measure answers, not refusals.
	if got, err := r.api.History(ctx, ns, loadKey(0), client.Identity{}); err != nil || len(got.Versions) != historyVersions {
		return nil, fmt.Errorf("memory.history of %s answered %+v (err %v), want %d versions", loadKey(0), got, err, historyVersions)
	}
	stopWriter := r.lightWriter(ctx, ns)
	defer stopWriter()
	for _, conc := range r.levels(5) {
		name := fmt.Sprintf("%d memories of %d versions, concurrency=%d", r.opts.GetRows, historyVersions, conc)
		rands := r.workerRands(conc)
		get, err := r.closedLoop(ctx, "memory.get "+name, conc, r.opts.Duration, func(ctx context.Context, w, _ int) error {
			_, err := r.api.Get(ctx, ns, loadKey(rands[w].IntN(r.opts.GetRows)), client.Identity{}, time.Time{})
			return err
		})
		if err != nil {
			return nil, err
		}
		hist, err := r.closedLoop(ctx, "memory.history "+name, conc, r.opts.Duration, func(ctx context.Context, w, _ int) error {
			_, err := r.api.History(ctx, ns, loadKey(rands[w].IntN(r.opts.GetRows)), client.Identity{})
			return err
		})
		if err != nil {
			return nil, err
		}
		p50 := res.compare(name, hist, get, "reads/s")
		p50.Gate = fmt.Sprintf("p50 ≤ %d× memory.get's: %s", historyGateRatio, passFail(hist.P50MS <= historyGateRatio*get.P50MS))
	}
	writes, errs := stopWriter()
	res.Notes = append(res.Notes, fmt.Sprintf("the writer committed %d revisions during the reads (%d refused)", writes, errs))
	return res, nil
}

// lightWriter revises random keys of ns at historyWritesPerSecond until stopped; stop
// answers how many writes it committed and how many were refused. Calling stop again
// answers the same.
func (r *runner) lightWriter(ctx context.Context, ns string) (stop func() (writes, errs int)) {
	ctx, cancel := context.WithCancel(ctx)
	rng := r.workerRands(1)[0]
	var wg sync.WaitGroup
	var writes, errs int
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second / historyWritesPerSecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			_, err := r.api.Set(ctx, ns, loadKey(rng.IntN(r.opts.GetRows)), client.SetRequest{Value: sentence(rng)})
			switch {
			case err == nil:
				writes++
			case ctx.Err() == nil:
				errs++
			}
		}
	}()
	var once sync.Once
	return func() (int, int) {
		once.Do(func() { cancel(); wg.Wait() })
		return writes, errs
	}
}
