package bench

import (
	"context"
	"fmt"

	"sync/atomic"
	"time"

	"github.com/loomplane/loom/client"
)

// bulk measures memory.bulk_set of BulkEntries entries against as many memory.set
// calls one after another, each rep into a fresh namespace, repeating each side
// while the run's duration lasts (at least once).
func (r *runner) bulk(ctx context.Context) (*ScenarioResult, error) {
	entries := r.opts.BulkEntries
	res := &ScenarioResult{
		Title:    fmt.Sprintf("memory.bulk_set of %d entries, rows/s", entries),
		Baseline: fmt.Sprintf("%d memory.set calls of the same entries, one after another", entries),
		Notes: []string{"both sides write into fresh namespaces with the default conflict policy: " +
			"every entry is judged (bulk_set judges the first LOOM_BULK_CONFLICT_CHECK_MAX_ENTRIES against the namespace's peers, and all against the batch)"},
	}
	key := func(i int) string { return fmt.Sprintf("k%04d", i) }
	var bulkTook, setTook []time.Duration
	start := time.Now()
	for rep := 0; rep == 0 || time.Since(start) < r.opts.Duration; rep++ {
		ns := r.namespace("bulk", fmt.Sprint(rep))
		batch := r.bulkEntries(0, entries, key)
		t0 := time.Now()
		ans, err := r.api.BulkSet(ctx, ns, client.BulkSetRequest{Entries: batch})
		if err != nil {
			return nil, fmt.Errorf("bulk_set of %d entries: %w", entries, err)
		}
		bulkTook = append(bulkTook, time.Since(t0))
		r.progress("  memory.bulk_set of %d: %s (%d written)", entries, bulkTook[len(bulkTook)-1].Round(time.Millisecond), len(ans.Written))
	}
	start = time.Now()
	for rep := 0; rep == 0 || time.Since(start) < r.opts.Duration; rep++ {
		ns := r.namespace("sets", fmt.Sprint(rep))
		batch := r.bulkEntries(0, entries, key)
		var done atomic.Int64
		stop := r.tick(fmt.Sprintf("%d memory.set calls", entries), func() string { return fmt.Sprintf("%d done", done.Load()) })
		t0 := time.Now()
		for _, e := range batch {
			done.Add(1)
			if _, err := r.api.Set(ctx, ns, e.Key, client.SetRequest{Value: e.Value}); err != nil {
				stop()
				return nil, fmt.Errorf("memory.set %s: %w", e.Key, err)
			}
		}
		setTook = append(setTook, time.Since(t0))
		stop()
		r.progress("  %d memory.set calls: %s", entries, setTook[len(setTook)-1].Round(time.Millisecond))
	}
	bulkRate, setRate := rowsPerSecond(entries, bulkTook), rowsPerSecond(entries, setTook)
	name := fmt.Sprintf("%d entries", entries)
	res.add(name, "rows/s", bulkRate, setRate)
	res.add(name, "ms per batch (mean)", meanMS(bulkTook), meanMS(setTook))
	res.Samples = append(res.Samples, CaseSamples{Case: name,
		Loom:     Sample{Concurrency: 1, Calls: len(bulkTook), Seconds: round(sum(bulkTook).Seconds(), 2), PerSecond: bulkRate},
		Baseline: &Sample{Concurrency: 1, Calls: len(setTook) * entries, Seconds: round(sum(setTook).Seconds(), 2), PerSecond: setRate}})
	return res, nil
}

func sum(ds []time.Duration) time.Duration {
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return t
}

func rowsPerSecond(perBatch int, took []time.Duration) float64 {
	return round(float64(perBatch*len(took))/sum(took).Seconds(), 1)
}

func meanMS(took []time.Duration) float64 {
	return ms(sum(took) / time.Duration(len(took)))
}
