package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/loomplane/loom/client"
)

// passesTouchKeys is how many memories the passes scenario keeps touched.
const passesTouchKeys = 200

// passes measures memory.set's latency while the background passes have work (the
// usage fold folding memory.touch calls made at the same time, one touch loop per
// writer) against memory.set alone, in the same run (issue 32's target: within 1.2×).
// The passes run only in a process with the workers role (loomd dev runs every role);
// against one without it the touches pile up unfolded and the figure is the touch
// path's cost alone, which the note says.
func (r *runner) passes(ctx context.Context) (*ScenarioResult, error) {
	res := &ScenarioResult{
		Title:    "memory.set with the background passes busy",
		Baseline: "memory.set alone, at the same concurrency, in the same run",
		Notes: []string{"the busy side also serves the memory.touch calls (one loop per writer) in the same process: " +
			"on a machine with few cores the ratio counts their CPU as well as the fold's commits"},
	}
	if !r.t.Process.Cfg.Roles.Has("workers") || !r.t.Process.Cfg.Workers.UsageFold.Enabled {
		res.Notes = append(res.Notes, "this process runs no usage fold (the workers role with LOOM_USAGE_FOLD_ENABLED): "+
			"the touches are recorded, not folded")
	}
	touched := r.namespace("passes", "touched")
	if err := r.appendOnly(ctx, touched); err != nil {
		return nil, err
	}
	if err := r.load(ctx, touched, passesTouchKeys); err != nil {
		return nil, err
	}
	for _, conc := range r.levels(1, 8) {
		name := fmt.Sprintf("concurrency=%d", conc)
		alone, err := r.setLoad(ctx, "memory.set alone "+name, r.namespace("passes", "alone", fmt.Sprint(conc)), 1, conc, r.opts.Duration)
		if err != nil {
			return nil, err
		}
		var touches atomic.Int64
		tctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for w := 0; w < conc; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; tctx.Err() == nil; i += conc {
					if _, err := r.api.Touch(tctx, touched, loadKey(i%passesTouchKeys), client.Identity{}); err == nil {
						touches.Add(1)
					}
				}
			}()
		}
		busy, err := r.setLoad(ctx, "memory.set with touches folding "+name, r.namespace("passes", "busy", fmt.Sprint(conc)), 1, conc, r.opts.Duration)
		stop()
		wg.Wait()
		if err != nil {
			return nil, err
		}
		res.compare(name, busy, alone, "writes/s")
		res.Notes = append(res.Notes, fmt.Sprintf("%s: %d touches made beside the writes", name, touches.Load()))
	}
	return res, nil
}
